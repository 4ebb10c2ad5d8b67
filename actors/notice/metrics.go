package notice

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/internal/promset"
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
	secs := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	s := promset.New(reg, "notice")
	m := &Metrics{
		Delivered: s.CounterVec("roomcell_notice_delivered_total", "Notices marked delivered.", "source"),
		Retryable: s.CounterVec("roomcell_notice_retryable_total",
			"Failed notice attempts that left the row retryable (backoff in next_retry_at_ms).", "source"),
		Failed: s.CounterVec("roomcell_notice_failed_total",
			"Notices that became dead letters (past max_retry_count, or a corrupt source event).", "source"),
		Ingested: s.CounterVec("roomcell_notice_ingested_total",
			"New notice_delivery_events rows, by how the fact arrived (poll or mq).", "source", "ingress"),
		SendLatency: s.HistogramVec("roomcell_notice_send_latency_seconds", "Duration of one IM C2C send, in seconds.", secs, "source"),
		DeliveryLag: s.HistogramVec("roomcell_notice_delivery_latency_seconds",
			"Time from the source event's created_at_ms to its delivered mark, in seconds.", append(secs, 30, 60, 300), "source"),
		OldestDueAge: s.GaugeVec("roomcell_notice_oldest_due_age_seconds",
			"Age in seconds of the oldest notice that is due for an attempt (0 when none).", "source"),
		DeadLetters: s.GaugeVec("roomcell_notice_dead_letters",
			"Failed notice rows waiting for an operator (roomctl notice list --status failed).", "source"),
		Open:    s.GaugeVec("roomcell_notice_open", "Notice rows still to deliver (delivering + retryable).", "source"),
		Batches: s.CounterVec("roomcell_notice_worker_batches_total", "Rounds a notice worker ran.", "source"),
	}
	if err := s.Err(); err != nil {
		return nil, err
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
