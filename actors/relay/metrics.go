package relay

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/outboxsend"
	"github.com/hyapp/roomcell/internal/promset"
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
	s := promset.New(reg, "relay")
	m := &Metrics{
		Pending: s.Gauge("room_outbox_pending_total", "room_outbox rows with status pending, as of the relay's last batch."),
		OldestPendingAge: s.Gauge("room_outbox_oldest_pending_age_ms",
			"Age in milliseconds of the oldest pending room_outbox row (0 when none), as of the relay's last batch."),
		Batches: s.Counter("roomcell_room_outbox_relay_batches_total", "Batches the relay ran (one per poll, plus operator retries)."),
		Parked: s.Counter("roomcell_room_outbox_parked_total",
			"room_outbox rows the relay parked (corrupt envelope or a permanent IM error); they wait for roomctl outbox requeue/skip."),
		ParkedRows: s.Gauge("roomcell_room_outbox_parked_rows", "room_outbox rows with status parked, as of the relay's last batch."),
	}
	if err := s.Err(); err != nil {
		return nil, err
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
	s := promset.New(reg, "relay: mq")
	m := &MQMetrics{
		Pending: s.Gauge("roomcell_room_outbox_mq_pending", "room_outbox rows the MQ fanout has still to publish, as of its last round."),
		Success: s.Counter("roomcell_room_outbox_mq_publish_success_total", "room_outbox rows the MQ fanout published to the topic."),
		Failure: s.Counter("roomcell_room_outbox_mq_publish_failure_total",
			"MQ fanout publishes that failed (the row stays MQ-pending; its IM status is not touched)."),
		Latency: s.Histogram("roomcell_room_outbox_mq_publish_latency_seconds", "Duration of one MQ publish of the fanout, in seconds.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, 1, 5}),
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
