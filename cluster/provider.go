package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/ownership"
)

// provider is a Proto.Actor ClusterProvider plus what a drain, a rejoin
// and readiness need. Our etcd and automanaged providers replace the
// library's (see docs/cluster.md for the reasons); single wraps the
// library's in-memory test provider.
type provider interface {
	pcluster.ClusterProvider
	// SelfID is this member's current membership id: the actor system id,
	// with "~N" appended after the N-th rejoin.
	SelfID() string
	// Synced reports that the provider has published its first complete
	// view of the cluster.
	Synced() bool
	// Leave deregisters this member but keeps following the others, so
	// the drain can watch its rooms move away.
	Leave(ctx context.Context) error
	// Kill stops heartbeating without deregistering: the others drop this
	// member only when its registration expires, as after a crash.
	Kill()
	// Rejoin re-registers under a fresh membership id if id is still the
	// current one (several detectors may report the same drop).
	// Proto.Actor blocks a dropped member id forever (#1083), so a member
	// the others dropped can only come back under a new id.
	Rejoin(id, reason string)
	// Rejoins counts completed re-registrations.
	Rejoins() int64
}

// rejoinHook is called by a provider when it drops its old id, before it
// registers the new one.
type rejoinHook func(oldID, newID, reason string)

// record is what a member publishes about itself (etcd value, automanaged
// health document).
type record struct {
	ID          string   `json:"id"`
	NodeID      string   `json:"node_id"`
	Cluster     string   `json:"cluster"`
	Host        string   `json:"host"`
	Port        int      `json:"port"`
	Kinds       []string `json:"kinds"`
	StartedAtMs int64    `json:"started_at_ms"`
}

func (r record) member() *pcluster.Member {
	kinds := append([]string{}, r.Kinds...)
	return &pcluster.Member{Id: r.ID, Host: r.Host, Port: int32(r.Port), Kinds: kinds}
}

// selfRecord describes the local member; call after the remote started,
// so the address is the advertised one.
func selfRecord(c *pcluster.Cluster, nodeID string) (record, error) {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return record{}, fmt.Errorf("cluster: member address: %w", err)
	}
	return record{
		ID: c.ActorSystem.ID, NodeID: nodeID, Cluster: c.Config.Name, Host: host, Port: port,
		Kinds: c.GetClusterKinds(), StartedAtMs: time.Now().UnixMilli(),
	}, nil
}

// generationID is the membership id of the gen-th registration.
func generationID(base string, gen int) string {
	if gen == 0 {
		return base
	}
	return base + "~" + strconv.Itoa(gen)
}

// baseID strips the generation suffix.
func baseID(id string) string {
	base, _, _ := strings.Cut(id, "~")
	return base
}

// singleProvider is the library's in-memory provider: one member per
// agent, or several members of one test process sharing an agent.
type singleProvider struct {
	*test.Provider
	id   atomic.Value // string
	once sync.Once
}

func newSingleProvider(agent *test.InMemAgent) *singleProvider {
	if agent == nil {
		agent = test.NewInMemAgent()
	}
	return &singleProvider{Provider: test.NewTestProvider(agent)}
}

func (p *singleProvider) StartMember(c *pcluster.Cluster) error {
	p.id.Store(c.ActorSystem.ID)
	return p.Provider.StartMember(c)
}

func (p *singleProvider) SelfID() string {
	id, _ := p.id.Load().(string)
	return id
}

func (p *singleProvider) Synced() bool { return p.SelfID() != "" }

// Shutdown deregisters once: the library calls it again from
// Cluster.Shutdown after our drain already did.
func (p *singleProvider) Shutdown(graceful bool) error {
	var err error
	p.once.Do(func() { err = p.Provider.Shutdown(graceful) })
	return err
}

func (p *singleProvider) Leave(context.Context) error { return p.Shutdown(true) }
func (p *singleProvider) Kill()                       { _ = p.Shutdown(false) }
func (p *singleProvider) Rejoin(string, string)       {}
func (p *singleProvider) Rejoins() int64              { return 0 }

// NewOwnership builds the ownership table the config asks for: with the
// etcd provider, shard leases in etcd under
// <etcd_base_key>/_ownership/<cluster.name> (outside the member prefix);
// otherwise shards follow the member view, without leases.
//
// hostsRooms false: the node follows the table but owns no shard.
func NewOwnership(cfg configs.ClusterConfig, nodeID string, hostsRooms bool, log *slog.Logger) (ownership.Table, error) {
	if cfg.Provider != configs.ProviderEtcd {
		return ownership.NewView(cfg.Shards), nil
	}
	tc, err := cfg.EtcdTLS.Load()
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd_tls: %w", err)
	}
	return ownership.NewEtcd(ownership.EtcdConfig{
		Endpoints: cfg.EtcdEndpoints, TLS: tc, Username: cfg.EtcdUsername, Password: cfg.EtcdPassword,
		Prefix:   strings.TrimRight(cfg.EtcdBaseKey, "/") + "/_ownership/" + cfg.Name,
		NodeID:   nodeID,
		Shards:   cfg.Shards,
		TTL:      cfg.ShardLeaseTTL,
		Margin:   cfg.ShardLeaseMargin,
		Logger:   log,
		Observer: !hostsRooms,
	})
}

// memberState is what the etcd and automanaged providers report alike:
// the member id this node runs as now, whether the provider has synced
// its view once, and how many times the node rejoined under a new id.
type memberState struct {
	selfID  atomic.Value // string
	synced  atomic.Bool
	rejoins atomic.Int64
}

func (m *memberState) SelfID() string {
	id, _ := m.selfID.Load().(string)
	return id
}

func (m *memberState) Synced() bool   { return m.synced.Load() }
func (m *memberState) Rejoins() int64 { return m.rejoins.Load() }
