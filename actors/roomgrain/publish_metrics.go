package roomgrain

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/outboxsend"
)

// PublishMetrics count what room publishers could not take on, and the
// rooms' snapshots (snapshot.go).
type PublishMetrics struct {
	// Overflow counts events left to the outbox relay because their
	// room's publish backlog was full (Deps.MaxPublishBacklog).
	Overflow prometheus.Counter
	// Sends are seed 000's per-send metrics with sender="publisher": the
	// relay's families, so room_outbox_publish_success_total counts every
	// published row whichever sender published it.
	Sends *outboxsend.Metrics
	// Snapshots: their sizes and failures.
	Snapshots *SnapshotMetrics
}

// NewPublishMetrics creates the instruments and registers them on reg.
func NewPublishMetrics(reg prometheus.Registerer) (*PublishMetrics, error) {
	m := &PublishMetrics{
		Overflow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcell_room_publish_overflow_total",
			Help: "Room events left to the outbox relay because the room's publish backlog was full (a hot room or a slow IM).",
		}),
	}
	if err := reg.Register(m.Overflow); err != nil {
		return nil, fmt.Errorf("room: register publish metrics: %w", err)
	}
	sends, err := outboxsend.For(reg, outboxsend.Publisher)
	if err != nil {
		return nil, err
	}
	m.Sends = sends
	if m.Snapshots, err = newSnapshotMetrics(reg); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *PublishMetrics) snapshot(size int, err error) {
	if m != nil {
		m.Snapshots.observe(size, err)
	}
}

// sent records one IM publish call that started at start: its latency,
// and a success (IM accepted it; its mark is queued) or a failure (the
// row stays pending for the relay).
func (m *PublishMetrics) sent(start time.Time, err error) {
	if m == nil || m.Sends == nil {
		return
	}
	m.Sends.Latency.Observe(float64(time.Since(start).Microseconds()) / 1000)
	if err != nil {
		m.Sends.Failure.Inc()
	} else {
		m.Sends.Success.Inc()
	}
}

func (m *PublishMetrics) overflowed(n int) {
	if m != nil {
		m.Overflow.Add(float64(n))
	}
}
