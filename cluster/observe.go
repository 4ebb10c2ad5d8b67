package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/ownership"
)

// metrics are the membership series on /metrics. With a nil Registerer
// they are kept but not exported.
type metrics struct {
	members prometheus.Gauge
	changes *prometheus.CounterVec
	rejoins prometheus.Counter
	ready   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, activations func(kind string) float64, kinds []string) (*metrics, error) {
	m := &metrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{Name: "roomcell_cluster_members",
			Help: "Members in this node's view of the cluster, itself included."}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roomcell_cluster_membership_changes_total",
			Help: "Members that joined or left this node's view."}, []string{"change"}),
		rejoins: prometheus.NewCounter(prometheus.CounterOpts{Name: "roomcell_cluster_rejoins_total",
			Help: "Times this node re-registered under a new member id after the cluster dropped it."}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "roomcell_cluster_ready",
			Help: "1 while this member is serving: registered, seen by itself and by every member it can reach."}),
	}
	m.changes.WithLabelValues("joined")
	m.changes.WithLabelValues("left")
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.members, m.changes, m.rejoins, m.ready}
	for _, k := range kinds {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "roomcell_cluster_activations",
			Help: "Grains active on this node, by kind (kind room: rooms hosted).", ConstLabels: prometheus.Labels{"kind": k}},
			func() float64 { return activations(k) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("cluster: metrics already registered: one member per registry")
			}
			return nil, err
		}
	}
	return m, nil
}

// view is this member's copy of the topology, fed from the event stream:
// the library's MemberList is read without its lock by Length/Members,
// which the race detector rightly flags.
type view struct {
	mu      sync.RWMutex
	members []*pcluster.Member // sorted by address
	hash    uint64
}

func (v *view) set(t *pcluster.ClusterTopology) {
	ms := append([]*pcluster.Member{}, t.Members...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Address() < ms[j].Address() })
	v.mu.Lock()
	v.members, v.hash = ms, t.TopologyHash
	v.mu.Unlock()
}

func (v *view) get() []*pcluster.Member {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.members
}

func (v *view) hasID(id string) bool {
	for _, m := range v.get() {
		if m.Id == id {
			return true
		}
	}
	return false
}

// observeTopology subscribes to membership changes: it keeps the view,
// logs every change and counts it. The handler runs inside the library's
// member list lock, so it only records.
func (m *Member) observeTopology() {
	m.System.EventStream.Subscribe(func(evt any) {
		t, ok := evt.(*pcluster.ClusterTopology)
		if !ok {
			return
		}
		m.view.set(t)
		if v, ok := m.ownership.(*ownership.View); ok {
			addrs := make([]string, 0, len(t.Members))
			for _, mm := range t.Members {
				// A member hosting no kind (notice-only) owns no shard.
				if len(mm.Kinds) > 0 {
					addrs = append(addrs, mm.Address())
				}
			}
			v.SetMembers(addrs)
		}
		m.metrics.members.Set(float64(len(t.Members)))
		m.metrics.changes.WithLabelValues("joined").Add(float64(len(t.Joined)))
		m.metrics.changes.WithLabelValues("left").Add(float64(len(t.Left)))
		level := slog.LevelInfo
		if len(t.Left) > 0 {
			level = slog.LevelWarn
		}
		m.logger.Log(context.Background(), level, "cluster membership changed", "members", len(t.Members),
			"joined", describe(t.Joined), "left", describe(t.Left), "topology_hash", t.TopologyHash)
	})
}

func describe(ms []*pcluster.Member) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, m.Id+"@"+m.Address())
	}
	return strings.Join(parts, ",")
}
