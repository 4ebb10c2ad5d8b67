package ownership

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count what a node lost of its room ownership. A nil *Metrics
// records nothing.
type Metrics struct {
	// LeaseLost counts expired shard leases (the node was frozen or cut
	// off from etcd past its TTL): every shard it held may have a new
	// owner, and its rooms stop and move.
	LeaseLost prometheus.Counter
	// ShardsLost counts shards the node stopped serving, by reason:
	// lease_lost (with the lease) or reassigned (a membership change gave
	// them to another node: an orderly handover).
	ShardsLost *prometheus.CounterVec
}

// Shard-loss reasons.
const (
	ReasonLeaseLost  = "lease_lost"
	ReasonReassigned = "reassigned"
)

// NewMetrics creates the instruments and registers them on reg; both
// reasons' series exist at zero from the start.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		LeaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcell_ownership_lease_lost_total",
			Help: "Shard leases this node lost (expired while it was paused or cut off from etcd): its rooms stopped and moved.",
		}),
		ShardsLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcell_ownership_shards_lost_total",
			Help: "Room shards this node stopped serving, by reason: lease_lost or reassigned (a membership change handed them over).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.LeaseLost, m.ShardsLost} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("ownership: register metrics: %w", err)
		}
	}
	m.ShardsLost.WithLabelValues(ReasonLeaseLost)
	m.ShardsLost.WithLabelValues(ReasonReassigned)
	return m, nil
}

func (m *Metrics) leaseLost() {
	if m != nil {
		m.LeaseLost.Inc()
	}
}

func (m *Metrics) shardsLost(reason string, n int) {
	if m != nil && n > 0 {
		m.ShardsLost.WithLabelValues(reason).Add(float64(n))
	}
}
