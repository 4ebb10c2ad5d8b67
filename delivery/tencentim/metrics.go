package tencentim

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the client's Prometheus instruments: every call to Tencent
// by API and outcome code, its duration, and the time calls spent
// waiting for the client's own quotas (the per-API rate and the per-group
// send rate). A nil *Metrics records nothing.
type Metrics struct {
	Calls    *prometheus.CounterVec   // api, code
	Duration *prometheus.HistogramVec // api
	// QuotaWait observes each limiter wait, in seconds, by api and
	// limiter ("api" or "group"); QuotaRefused counts calls given up
	// because the wait would outlive the caller's deadline.
	QuotaWait    *prometheus.HistogramVec
	QuotaRefused *prometheus.CounterVec
}

// Limiter label values.
const (
	LimiterAPI   = "api"
	LimiterGroup = "group"
)

// NewMetrics creates the instruments and registers them on reg. The
// series of every API the client calls exist at zero from the start
// (code "0"), so a dashboard finds them before the first call.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcell_tencent_im_calls_total",
			Help: "Tencent IM REST calls by API and outcome code: 0 success, a Tencent ErrorCode, http_NNN for a gateway status, or transport (no usable response).",
		}, []string{"api", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "roomcell_tencent_im_call_duration_seconds",
			Help:    "Duration of one Tencent IM REST call (the HTTP round trip, not the quota wait), by API.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"api"}),
		QuotaWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "roomcell_tencent_im_quota_wait_seconds",
			Help:    "Time a Tencent IM call waited for the client's own rate budget, by API and limiter (api: the per-API rate; group: the per-group send rate).",
			Buckets: []float64{.0001, .001, .01, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"api", "limiter"}),
		QuotaRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcell_tencent_im_quota_refused_total",
			Help: "Tencent IM calls given up before they were sent because the rate budget's wait would outlive the caller's deadline, by API and limiter.",
		}, []string{"api", "limiter"}),
	}
	for _, c := range []prometheus.Collector{m.Calls, m.Duration, m.QuotaWait, m.QuotaRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("tencent im: register metrics: %w", err)
		}
	}
	for _, api := range []string{APIAccountImport, APISendMsg, APISendGroupMsg, APICreateGroup, APIDeleteGroupMember, APIDestroyGroup, APIBanGroupMember} {
		m.Calls.WithLabelValues(api, "0")
		m.Duration.WithLabelValues(api)
		m.QuotaWait.WithLabelValues(api, LimiterAPI)
		m.QuotaRefused.WithLabelValues(api, LimiterAPI)
	}
	m.QuotaWait.WithLabelValues(APISendGroupMsg, LimiterGroup)
	m.QuotaRefused.WithLabelValues(APISendGroupMsg, LimiterGroup)
	return m, nil
}

// WithMetrics records the client's calls and quota waits on m (one
// Metrics may serve several clients of a process).
func WithMetrics(m *Metrics) Option { return func(c *Client) { c.metrics = m } }

// OutcomeCode is the code label of a call's result.
func OutcomeCode(err error) string {
	if err == nil {
		return "0"
	}
	var e *Error
	switch {
	case !errors.As(err, &e):
		return "transport"
	case e.Code != 0:
		return strconv.Itoa(e.Code)
	case e.HTTPStatus != 0:
		return "http_" + strconv.Itoa(e.HTTPStatus)
	default:
		return "transport"
	}
}

func (m *Metrics) called(api string, start time.Time, err error) {
	if m == nil {
		return
	}
	m.Calls.WithLabelValues(api, OutcomeCode(err)).Inc()
	m.Duration.WithLabelValues(api).Observe(time.Since(start).Seconds())
}

func (m *Metrics) waited(api, limiter string, start time.Time, refused bool) {
	if m == nil {
		return
	}
	if refused {
		m.QuotaRefused.WithLabelValues(api, limiter).Inc()
		return
	}
	m.QuotaWait.WithLabelValues(api, limiter).Observe(time.Since(start).Seconds())
}
