package promset

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Every constructor registers what it makes, with the name, help, labels
// and buckets given: the registry gathers each family as written.
func TestSetRegistersAsWritten(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := New(reg, "comp")
	s.Counter("c_total", "a counter").Inc()
	s.Gauge("g", "a gauge").Set(3)
	s.Histogram("h_ms", "a histogram", []float64{1, 10}).Observe(5)
	s.CounterVec("cv_total", "a counter family", "source").WithLabelValues("x").Inc()
	s.GaugeVec("gv", "a gauge family", "table", "kind").WithLabelValues("t", "k").Set(1)
	s.HistogramVec("hv_ms", "a histogram family", []float64{2}, "sender").WithLabelValues("relay").Observe(1)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		help   string
		typ    dto.MetricType
		labels []string
	}{
		"c_total":  {"a counter", dto.MetricType_COUNTER, nil},
		"g":        {"a gauge", dto.MetricType_GAUGE, nil},
		"h_ms":     {"a histogram", dto.MetricType_HISTOGRAM, nil},
		"cv_total": {"a counter family", dto.MetricType_COUNTER, []string{"source"}},
		"gv":       {"a gauge family", dto.MetricType_GAUGE, []string{"kind", "table"}},
		"hv_ms":    {"a histogram family", dto.MetricType_HISTOGRAM, []string{"sender"}},
	}
	if len(fams) != len(want) {
		t.Fatalf("gathered %d families, want %d", len(fams), len(want))
	}
	for _, f := range fams {
		w, ok := want[f.GetName()]
		if !ok || f.GetHelp() != w.help || f.GetType() != w.typ {
			t.Errorf("family %s (%q, %v) not as written", f.GetName(), f.GetHelp(), f.GetType())
			continue
		}
		var got []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			got = append(got, l.GetName())
		}
		if strings.Join(got, ",") != strings.Join(w.labels, ",") {
			t.Errorf("family %s labels %v, want %v", f.GetName(), got, w.labels)
		}
	}
	for _, f := range fams {
		if f.GetName() == "h_ms" {
			if b := f.GetMetric()[0].GetHistogram().GetBucket(); len(b) != 2 || b[0].GetUpperBound() != 1 || b[1].GetUpperBound() != 10 {
				t.Errorf("h_ms buckets %v, want 1 and 10", b)
			}
		}
	}
}

// A set registered twice on one registry fails, naming its owner, as a
// component's NewMetrics did with its own loop.
func TestSetKeepsTheFirstError(t *testing.T) {
	reg := prometheus.NewRegistry()
	build := func() error {
		s := New(reg, "relay")
		s.Counter("a_total", "a")
		s.Gauge("b", "b")
		return s.Err()
	}
	if err := build(); err != nil {
		t.Fatal(err)
	}
	err := build()
	var dup prometheus.AlreadyRegisteredError
	if !errors.As(err, &dup) || !strings.HasPrefix(err.Error(), "relay: register metrics: ") {
		t.Fatalf("second registration: %v, want an AlreadyRegisteredError prefixed with the owner", err)
	}
}
