package outboxsend

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Sender label values.
const (
	Relay     = "relay"
	Publisher = "publisher"
)

// Metrics are one sender's instruments. A nil *Metrics records nothing.
type Metrics struct {
	// Success counts rows the sender marked published (for the relay,
	// non-IM events marked without a send too); Failure counts publish
	// attempts that failed (the row stays pending for a retry).
	Success prometheus.Counter
	Failure prometheus.Counter
	// Latency observes each IM publish call, in milliseconds.
	Latency prometheus.Observer
}

// For returns sender's instruments on reg. The families are registered
// by the first call on reg and reused by the next (the relay and the room
// publisher of one process share them); sender's series exist at zero
// from this call on, so a dashboard finds them before the first send.
func For(reg prometheus.Registerer, sender string) (*Metrics, error) {
	success, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "room_outbox_publish_success_total",
		Help: "room_outbox rows marked published, by sender: relay (the outbox relay) or publisher (the room's own publisher).",
	}, []string{"sender"}))
	if err != nil {
		return nil, err
	}
	failure, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "room_outbox_publish_failure_total",
		Help: "Publish attempts of room_outbox rows that failed (the row stays pending), by sender.",
	}, []string{"sender"}))
	if err != nil {
		return nil, err
	}
	latency, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "room_outbox_publish_latency_ms",
		Help:    "Duration of one IM publish call of a room_outbox row, in milliseconds, by sender.",
		Buckets: []float64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000},
	}, []string{"sender"}))
	if err != nil {
		return nil, err
	}
	return &Metrics{
		Success: success.WithLabelValues(sender),
		Failure: failure.WithLabelValues(sender),
		Latency: latency.WithLabelValues(sender),
	}, nil
}

// register registers c on reg, or returns the collector of the same
// family already there.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if existing, ok := dup.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	if err != nil {
		return c, fmt.Errorf("outboxsend: register metrics: %w", err)
	}
	return c, nil
}
