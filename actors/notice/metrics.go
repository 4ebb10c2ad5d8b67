package notice

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/persistence"
)

// Metrics are the notice workers' Prometheus instruments, labelled by
// source (wallet_outbox, room_outbox), so both workers share one set. A
// nil *Metrics records nothing.
type Metrics struct {
	// Counters of what the workers did.
	Delivered *prometheus.CounterVec // rows marked delivered
	Retryable *prometheus.CounterVec // failed attempts that left the row retryable
	Failed    *prometheus.CounterVec // rows that became dead letters
	Ingested  *prometheus.CounterVec // new rows, by source and ingress (poll, mq)
	// SendLatency observes each IM send call; DeliveryLag the time from
	// the source event to its delivered mark.
	SendLatency *prometheus.HistogramVec
	DeliveryLag *prometheus.HistogramVec
	// Gauges from the store (Stats), refreshed at most once a second per
	// worker: they describe the whole table, not this node.
	OldestDueAge *prometheus.GaugeVec
	DeadLetters  *prometheus.GaugeVec
	Open         *prometheus.GaugeVec // delivering + retryable rows
	Batches      *prometheus.CounterVec
}

// NewMetrics creates the instruments and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	ms := []float64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}
	m := &Metrics{
		Delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "notice_delivered_total",
			Help: "Notices marked delivered.",
		}, []string{"source"}),
		Retryable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "notice_retryable_total",
			Help: "Failed notice attempts that left the row retryable (backoff in next_retry_at_ms).",
		}, []string{"source"}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "notice_failed_total",
			Help: "Notices that became dead letters (past max_retry_count, or a corrupt source event).",
		}, []string{"source"}),
		Ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "notice_ingested_total",
			Help: "New notice_delivery_events rows, by how the fact arrived (poll or mq).",
		}, []string{"source", "ingress"}),
		SendLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "notice_send_latency_ms",
			Help:    "Duration of one IM C2C send, in milliseconds.",
			Buckets: ms,
		}, []string{"source"}),
		DeliveryLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "notice_delivery_latency_ms",
			Help:    "Time from the source event's created_at_ms to its delivered mark, in milliseconds.",
			Buckets: append(ms, 30000, 60000, 300000),
		}, []string{"source"}),
		OldestDueAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "notice_oldest_due_age_ms",
			Help: "Age in milliseconds of the oldest notice that is due for an attempt (0 when none).",
		}, []string{"source"}),
		DeadLetters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "notice_dead_letters",
			Help: "Failed notice rows waiting for an operator (roomctl notice list --status failed).",
		}, []string{"source"}),
		Open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "notice_open",
			Help: "Notice rows still to deliver (delivering + retryable).",
		}, []string{"source"}),
		Batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "notice_worker_batches_total",
			Help: "Rounds a notice worker ran.",
		}, []string{"source"}),
	}
	for _, c := range []prometheus.Collector{m.Delivered, m.Retryable, m.Failed, m.Ingested, m.SendLatency,
		m.DeliveryLag, m.OldestDueAge, m.DeadLetters, m.Open, m.Batches} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("notice: register metrics: %w", err)
		}
	}
	// Every source's series exist at zero from the start: a dashboard
	// shows no failures as 0, not as no data.
	for _, src := range []string{persistence.SourceWalletOutbox, persistence.SourceRoomOutbox} {
		for _, c := range []*prometheus.CounterVec{m.Delivered, m.Retryable, m.Failed, m.Batches} {
			c.WithLabelValues(src)
		}
		for _, in := range []string{persistence.IngressPoll, persistence.IngressMQ} {
			m.Ingested.WithLabelValues(src, in)
		}
		m.SendLatency.WithLabelValues(src)
		m.DeliveryLag.WithLabelValues(src)
	}
	return m, nil
}
