package room

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// PublishMetrics count what room publishers could not take on.
type PublishMetrics struct {
	// Overflow counts events left to the outbox relay because their
	// room's publish backlog was full (Deps.MaxPublishBacklog).
	Overflow prometheus.Counter
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
	return m, nil
}

func (m *PublishMetrics) overflowed(n int) {
	if m != nil {
		m.Overflow.Add(float64(n))
	}
}
