package relay

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/outboxsend"
)

// Metrics are the relay's Prometheus instruments: the five of seed 000's
// Observability section plus a batch counter that shows the relay is alive.
// A nil *Metrics records nothing.
type Metrics struct {
	// Pending and OldestPendingAge come from the store (OutboxStats) after
	// every batch, so they describe the whole room_outbox, not this node.
	Pending          prometheus.Gauge
	OldestPendingAge prometheus.Gauge
	// Success counts rows marked published, including non-IM events that
	// are marked without a send; Failure counts rows marked failed,
	// including corrupt envelopes. Latency observes each IM publish call
	// (not the store writes). All three are the sender="relay" series of
	// families the room publisher shares (outboxsend).
	Success prometheus.Counter
	Failure prometheus.Counter
	Latency prometheus.Observer
	Batches prometheus.Counter
	// Parked counts rows this relay parked; ParkedRows is the store's
	// parked rows (waiting for an operator) as of the last batch.
	Parked     prometheus.Counter
	ParkedRows prometheus.Gauge
}

// NewMetrics creates the instruments and registers them on reg. Wrap reg
// with prometheus.WrapRegistererWith for constant labels such as node_id.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "room_outbox_pending_total",
			Help: "room_outbox rows with status pending, as of the relay's last batch.",
		}),
		OldestPendingAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "room_outbox_oldest_pending_age_ms",
			Help: "Age in milliseconds of the oldest pending room_outbox row (0 when none), as of the relay's last batch.",
		}),
		Batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "room_outbox_relay_batches_total",
			Help: "Batches the relay ran (one per poll, plus operator retries).",
		}),
		Parked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "room_outbox_parked_total",
			Help: "room_outbox rows the relay parked (corrupt envelope or a permanent IM error); they wait for roomctl outbox requeue/skip.",
		}),
		ParkedRows: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "room_outbox_parked_rows",
			Help: "room_outbox rows with status parked, as of the relay's last batch.",
		}),
	}
	for _, c := range []prometheus.Collector{m.Pending, m.OldestPendingAge, m.Batches, m.Parked, m.ParkedRows} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("relay: register metrics: %w", err)
		}
	}
	sends, err := outboxsend.For(reg, outboxsend.Relay)
	if err != nil {
		return nil, err
	}
	m.Success, m.Failure, m.Latency = sends.Success, sends.Failure, sends.Latency
	return m, nil
}

// MQMetrics are the MQ fanout worker's instruments. A nil *MQMetrics
// records nothing.
type MQMetrics struct {
	// Pending is the store's MQ-pending rows as of the last round.
	Pending prometheus.Gauge
	Success prometheus.Counter
	Failure prometheus.Counter
	Latency prometheus.Histogram
}

// NewMQMetrics creates the fanout's instruments and registers them on reg.
func NewMQMetrics(reg prometheus.Registerer) (*MQMetrics, error) {
	m := &MQMetrics{
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "room_outbox_mq_pending_total",
			Help: "room_outbox rows the MQ fanout has still to publish, as of its last round.",
		}),
		Success: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "room_outbox_mq_publish_success_total",
			Help: "room_outbox rows the MQ fanout published to the topic.",
		}),
		Failure: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "room_outbox_mq_publish_failure_total",
			Help: "MQ fanout publishes that failed (the row stays MQ-pending; its IM status is not touched).",
		}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "room_outbox_mq_publish_latency_ms",
			Help:    "Duration of one MQ publish of the fanout, in milliseconds.",
			Buckets: []float64{1, 2.5, 5, 10, 25, 50, 100, 250, 1000, 5000},
		}),
	}
	for _, c := range []prometheus.Collector{m.Pending, m.Success, m.Failure, m.Latency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("relay: register mq metrics: %w", err)
		}
	}
	return m, nil
}
