package tencentim_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/tencentim"
)

// Each call is counted under its API and its outcome code (0, a Tencent
// ErrorCode, a gateway status), and time spent waiting for the client's
// own quota is observed; a wait the deadline cannot cover is counted as
// refused, not as a call.
func TestMetricsCountCallsByAPIAndCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := tencentim.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv, c := pair(t, func(c *configs.TencentIMConfig) { c.RatePerSecond = 5 }, tencentim.WithMetrics(m))
	ctx := ctxT(t)
	calls := func(api, code string) float64 { return testutil.ToFloat64(m.Calls.WithLabelValues(api, code)) }
	if got := calls(tencentim.APISendMsg, "0"); got != 0 {
		t.Fatalf("sendmsg series before any call: %v", got)
	}
	for _, u := range []string{"u_1", "u_2"} {
		if err := c.ImportAccount(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
	}
	srv.FailNext(1, 90009)
	if err := c.ImportAccount(ctx, "u_3", ""); tencentim.CodeOf(err) != 90009 {
		t.Fatalf("injected 90009: %v", err)
	}
	srv.SetHTTPStatus(http.StatusBadGateway)
	if err := c.ImportAccount(ctx, "u_4", ""); err == nil {
		t.Fatal("502 accepted")
	}
	srv.SetHTTPStatus(0)
	for code, want := range map[string]float64{"0": 2, "90009": 1, "http_502": 1} {
		if got := calls(tencentim.APIAccountImport, code); got != want {
			t.Errorf("account_import code %s: %v calls, want %v", code, got, want)
		}
	}
	// Four calls at 5/s with a burst of one: the last three waited about
	// 200 ms each for the budget.
	if n := testutil.CollectAndCount(m.QuotaWait, "roomcell_tencent_im_quota_wait_seconds"); n < 8 {
		t.Fatalf("%d quota wait series: want every API's at zero from the start", n)
	}
	waits := histogramSum(t, m.QuotaWait.WithLabelValues(tencentim.APIAccountImport, tencentim.LimiterAPI))
	if waits.count != 4 || waits.sum < 0.4 {
		t.Fatalf("account_import quota waits: %d observed, %.3fs in all; want 4 and at least 0.4s", waits.count, waits.sum)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := c.ImportAccount(short, "u_5", ""); !errors.Is(err, tencentim.ErrRateLimited) {
		t.Fatalf("over-budget wait: %v", err)
	}
	if got := testutil.ToFloat64(m.QuotaRefused.WithLabelValues(tencentim.APIAccountImport, tencentim.LimiterAPI)); got != 1 {
		t.Fatalf("refused waits %v, want 1", got)
	}
	if got := calls(tencentim.APIAccountImport, "0") + calls(tencentim.APIAccountImport, "90009") + calls(tencentim.APIAccountImport, "http_502"); got != 4 {
		t.Fatalf("a refused wait was counted as a call: %v calls", got)
	}
}

type histSum struct {
	count uint64
	sum   float64
}

func histogramSum(t *testing.T, o prometheus.Observer) histSum {
	t.Helper()
	h, ok := o.(prometheus.Histogram)
	if !ok {
		t.Fatalf("%T is not a histogram", o)
	}
	ch := make(chan prometheus.Metric, 1)
	h.Collect(ch)
	var out dto.Metric
	if err := (<-ch).Write(&out); err != nil {
		t.Fatal(err)
	}
	return histSum{out.GetHistogram().GetSampleCount(), out.GetHistogram().GetSampleSum()}
}
