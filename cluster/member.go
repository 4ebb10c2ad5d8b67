package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/ownership"
)

// Options configure one member.
type Options struct {
	Config configs.ClusterConfig
	// NodeID names this process in reports and logs (configs.Config.NodeID).
	NodeID string
	// Kinds made with package kind cost less an active grain than those
	// of pcluster.NewKind (kind.New says why); both work.
	Kinds  []*pcluster.Kind
	Logger *slog.Logger
	// LibraryLogLevel is the level Proto.Actor's own logs pass at
	// (default Warn: it is chatty at Info).
	LibraryLogLevel slog.Level
	// MeterProvider, when set, is installed as the global OTel provider
	// before the actor system exists: Proto.Actor takes its instruments
	// from the global provider, and without one it leaks memory per actor.
	// Its metrics are exported only with Config.ActorMetrics.
	MeterProvider metric.MeterProvider
	// Registerer receives the membership metrics (roomcell_cluster_*).
	// Nil: not exported. One member per registry.
	Registerer prometheus.Registerer
	// Agent lets several single-provider members in one process see each
	// other (tests). Nil = a private agent: a one-member cluster.
	Agent *test.InMemAgent
	// Ownership decides where grains live and whether this member may
	// serve one (NewOwnership builds it from the config; pass the same
	// table to the room grains). Nil: shards follow the member view
	// (ownership.View), without leases.
	Ownership ownership.Table
}

// Member statuses, as reported by roomctl cluster members.
const (
	StatusJoining   = "joining"   // started, not yet seen by itself and its peers
	StatusServing   = "serving"   // WaitReady succeeded
	StatusRejoining = "rejoining" // dropped by the cluster, re-registering
	StatusDraining  = "draining"  // graceful leave in progress
	StatusStopped   = "stopped"
)

// Member is a started cluster member.
type Member struct {
	System  *actor.ActorSystem
	Cluster *pcluster.Cluster

	cfg       configs.ClusterConfig
	nodeID    string
	kinds     []string
	logger    *slog.Logger
	provider  provider
	metrics   *metrics
	view      view
	startedAt time.Time
	ownership ownership.Table
	lookup    *lookup

	ready    atomic.Bool
	stopping atomic.Int32 // 0 running, 1 draining, 2 stopped
	stopOnce sync.Once
	cancel   context.CancelFunc // the watchdog
	done     chan struct{}
}

// Start builds and starts a member. Proto.Actor panics on bind and
// provider errors; Start turns those into errors.
func Start(o Options) (m *Member, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LibraryLogLevel == 0 {
		o.LibraryLogLevel = slog.LevelWarn
	}
	if o.NodeID == "" {
		o.NodeID, _ = os.Hostname()
	}
	cfg := o.Config
	if cfg.Provider != configs.ProviderSingle && cfg.AdvertisedHost == "" {
		if ip := net.ParseIP(cfg.Host); ip != nil && ip.IsUnspecified() {
			return nil, fmt.Errorf("cluster: cluster.host %s is a wildcard: set cluster.advertised_host to the host:port the other members dial", cfg.Host)
		}
	}
	if o.MeterProvider != nil {
		otel.SetMeterProvider(o.MeterProvider)
	}
	libLogger := slog.New(&levelHandler{min: o.LibraryLogLevel, next: o.Logger.Handler()}).With("lib", "protoactor")
	sysOpts := []actor.ConfigOption{
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return libLogger }),
		actor.WithDeadLetterRequestLogging(false),
	}
	if o.MeterProvider != nil && cfg.ActorMetrics {
		sysOpts = append(sysOpts, actor.WithMetricProviders(o.MeterProvider))
	}
	system := actor.NewActorSystem(sysOpts...)

	if o.Ownership == nil {
		o.Ownership = ownership.NewView(0)
	}
	m = &Member{System: system, cfg: cfg, nodeID: o.NodeID, logger: o.Logger, startedAt: time.Now(), done: make(chan struct{}),
		ownership: o.Ownership, lookup: &lookup{table: o.Ownership, log: o.Logger}}
	m.lookup.stopping = &m.stopping
	for _, k := range o.Kinds {
		m.kinds = append(m.kinds, k.Kind)
	}
	if m.metrics, err = newMetrics(o.Registerer, func(k string) float64 { return float64(m.activations(k)) }, m.kinds); err != nil {
		return nil, err
	}
	switch cfg.Provider {
	case configs.ProviderSingle:
		m.provider = newSingleProvider(o.Agent)
	case configs.ProviderAutomanaged:
		m.provider = newAutomanagedProvider(cfg, o.NodeID, o.Logger, m.onRejoin)
	case configs.ProviderEtcd:
		if m.provider, err = newEtcdProvider(cfg, o.NodeID, o.Logger, m.onRejoin); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("cluster: unknown provider %q", cfg.Provider)
	}

	var remoteOpts []remote.ConfigOption
	if cfg.AdvertisedHost != "" {
		remoteOpts = append(remoteOpts, remote.WithAdvertisedHost(cfg.AdvertisedHost))
	}
	serverOpts := append([]grpc.ServerOption{grpc.UnaryInterceptor(refuseRemoteUnary)}, remoteKeepaliveServer...)
	// These replace the library's default dial option (insecure).
	dialOpts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, remoteKeepaliveDial...)
	if cfg.TLS.Enabled() {
		srv, cli, err := cfg.TLS.Load()
		if err != nil {
			return nil, fmt.Errorf("cluster.tls: %w", err)
		}
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(srv)))
		dialOpts[0] = grpc.WithTransportCredentials(credentials.NewTLS(cli))
	}
	remoteOpts = append(remoteOpts, remote.WithServerOptions(serverOpts...), remote.WithDialOptions(dialOpts...))
	ccfg := pcluster.Configure(cfg.Name, m.provider, m.lookup,
		remote.Configure(cfg.Host, cfg.Port, remoteOpts...),
		pcluster.WithKinds(o.Kinds...),
		pcluster.WithRequestTimeout(cfg.RequestTimeout),
	)
	m.Cluster = pcluster.New(system, ccfg)
	m.observeTopology()
	if err := m.startMember(); err != nil {
		return nil, err
	}
	if m.lookup.startErr != nil {
		m.ownership.Close()
		m.Cluster.Shutdown(false)
		return nil, fmt.Errorf("cluster: ownership table: %w", m.lookup.startErr)
	}
	if err := m.spawnReporter(); err != nil {
		m.Cluster.Shutdown(false)
		return nil, fmt.Errorf("cluster: member reporter: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.watchdog(ctx)
	o.Logger.Info("cluster member started", "cluster", cfg.Name, "provider", cfg.Provider,
		"address", system.Address(), "member_id", m.provider.SelfID())
	return m, nil
}

func (m *Member) startMember() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cluster: start member: %v", r)
			if m.Cluster.Remote != nil {
				m.Cluster.Remote.Shutdown(false)
			}
			m.provider.Kill()
		}
	}()
	m.Cluster.StartMember()
	return nil
}

// WaitReady blocks until this member is registered, sees itself, and
// every other member it can reach lists it; then it reports serving.
// Right after StartMember the member list can be empty (every request
// fails fast), and a peer that has not seen this member yet places its
// rooms without it (duplicate activations).
// Unreachable peers do not hold readiness back: the provider drops them.
func (m *Member) WaitReady(ctx context.Context) error {
	start := time.Now()
	var why string
	for {
		switch {
		case !m.provider.Synced():
			why = "provider has not listed the cluster yet"
		case !m.view.hasID(m.provider.SelfID()):
			why = "this member is not in its own member list yet"
		default:
			qctx, cancel := context.WithTimeout(ctx, probeTimeout)
			ok, missing := peersSeeMe(m.Address(), m.Survey(qctx, "", ""))
			cancel()
			if ok {
				m.ready.Store(true)
				m.metrics.ready.Set(1)
				m.logger.Info("cluster member ready", "members", len(m.view.get()), "waited", time.Since(start).Round(time.Millisecond))
				return nil
			}
			why = "members not seeing this one yet: " + strings.Join(missing, ",")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: not ready before deadline: %s", why)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Ready reports serving: readiness for /readyz.
func (m *Member) Ready() bool { return m.Status() == StatusServing }

// Status is one of the Status* constants.
func (m *Member) Status() string {
	switch m.stopping.Load() {
	case 1:
		return StatusDraining
	case 2:
		return StatusStopped
	}
	if !m.ready.Load() {
		return StatusJoining
	}
	if !m.view.hasID(m.provider.SelfID()) {
		return StatusRejoining
	}
	return StatusServing
}

// NodeID is the configured node id.
func (m *Member) NodeID() string { return m.nodeID }

// MemberID is the current membership id.
func (m *Member) MemberID() string { return m.provider.SelfID() }

// Provider is the configured provider name.
func (m *Member) Provider() string { return m.cfg.Provider }

// Members is this member's current view, sorted by address.
func (m *Member) Members() []*pcluster.Member { return m.view.get() }

// Activations counts grains of kind active on this member.
func (m *Member) activations(kind string) int32 {
	k, ok := m.Cluster.TryGetClusterKind(kind)
	if !ok {
		return 0
	}
	return k.Count()
}

// Activations counts grains of kind active on this member.
func (m *Member) Activations(kind string) int { return int(m.activations(kind)) }

// onRejoin runs when the provider gives up its old membership id. Rooms
// active here may have been activated elsewhere since the others dropped
// this member, so they are stopped: the next command loads them from the
// store wherever they are placed.
//
// With a leased ownership table the grains stay: they answer only while
// this node holds their shard's lease, which the gossip membership does
// not decide, so a rejoin costs no room its activation.
func (m *Member) onRejoin(oldID, newID, reason string) {
	m.metrics.rejoins.Inc()
	if _, viewBased := m.ownership.(*ownership.View); !viewBased {
		m.logger.Warn("cluster member rejoining; grains stay (guarded by their shard leases)", "reason", reason,
			"old_member_id", oldID, "member_id", newID, "rooms", m.activations("room"))
		return
	}
	m.logger.Warn("cluster member rejoining: stopping local grains", "reason", reason,
		"old_member_id", oldID, "member_id", newID, "rooms", m.activations("room"))
	m.poisonLocalGrains()
}

// poisonLocalGrains asks the placement actor to stop every grain it holds.
func (m *Member) poisonLocalGrains() {
	m.System.Root.Send(m.System.NewLocalPID(placementName), &stopGrains{})
}

// watchdog re-registers this member if another member reports it on its
// block list: Proto.Actor's gossip can block a member (expired heartbeat)
// without the provider noticing, and that member would keep hosting rooms
// nobody else routes to it.
func (m *Member) watchdog(ctx context.Context) {
	defer close(m.done)
	every := max(2*m.cfg.RefreshInterval, 2*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if m.Status() != StatusServing {
			continue
		}
		self := m.provider.SelfID()
		qctx, cancel := context.WithTimeout(ctx, probeTimeout)
		reports := m.Survey(qctx, "", "")
		cancel()
		for _, r := range reports {
			if !r.Self && r.Err == nil && slices.Contains(r.Report.GetBlocked(), self) {
				m.provider.Rejoin(self, blockedReason+" "+r.Report.GetNodeId())
				break
			}
		}
	}
}

// Stop leaves the cluster. graceful=true drains (see Drain) and then runs
// Proto.Actor's graceful shutdown; graceful=false stops without
// deregistering, as a crash would (tests), and the others drop this
// member when its registration expires.
func (m *Member) Stop(graceful bool) {
	m.stopOnce.Do(func() {
		m.cancel()
		<-m.done
		m.ready.Store(false)
		m.metrics.ready.Set(0)
		if graceful {
			m.Drain()
			m.Cluster.Shutdown(true)
			m.ownership.Close()
		} else {
			m.stopping.Store(2)
			m.lookup.settle()
			m.provider.Kill()
			if k, ok := m.ownership.(interface{ Kill() }); ok {
				k.Kill()
			} else {
				m.ownership.Close()
			}
			m.Cluster.Shutdown(false)
		}
		m.stopping.Store(2)
		m.logger.Info("cluster member stopped", "graceful", graceful)
	})
}

// Drain deregisters this member, so every member (this one included)
// places its rooms elsewhere and the local room grains are poisoned (they
// snapshot in Stopping); it then waits, up to cluster.drain_timeout, until
// no reachable member lists this one and no grain is active here. A
// command queued in a room before the poison is still answered; one sent
// after it gets a dead letter, which the room client retries on the new
// owner.
func (m *Member) Drain() {
	m.stopping.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.DrainTimeout)
	defer cancel()
	start := time.Now()
	rooms := m.activations("room")
	if err := m.provider.Leave(ctx); err != nil {
		m.logger.Warn("cluster drain: deregister failed; the others drop this member when its registration expires", "error", err)
	}
	if _, viewBased := m.ownership.(*ownership.View); !viewBased {
		// Give every shard back at once (the lease is revoked): the
		// others take the rooms over now, not after the lease TTL.
		m.ownership.Close()
		m.poisonLocalGrains()
	}
	self := m.Address()
	lastPoison := time.Time{}
	for {
		qctx, qcancel := context.WithTimeout(ctx, probeTimeout)
		listing := listedBy(self, m.Survey(qctx, "", ""))
		qcancel()
		seenBy := len(listing) > 0
		active := 0
		for _, k := range m.kinds {
			active += int(m.activations(k))
		}
		if !seenBy && active == 0 {
			m.logger.Info("cluster member drained", "rooms_moved", rooms, "took", time.Since(start).Round(time.Millisecond))
			return
		}
		// A member that still routed here re-activated grains after the
		// placement actor's last topology change: stop them again.
		if active > 0 && time.Since(lastPoison) > 500*time.Millisecond {
			m.poisonLocalGrains()
			lastPoison = time.Now()
		}
		select {
		case <-ctx.Done():
			m.logger.Warn("cluster drain timed out", "still_listed_by", strings.Join(listing, ","), "grains_active", active,
				"took", time.Since(start).Round(time.Millisecond))
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Address is host:port other members dial.
func (m *Member) Address() string { return m.System.Address() }

// Port returns the remote port actually bound.
func (m *Member) Port() int {
	_, p, _ := net.SplitHostPort(m.System.Address())
	n, _ := strconv.Atoi(p)
	return n
}

// levelHandler drops records below min: Proto.Actor logs at Info on every
// activation, and we want its warnings only.
type levelHandler struct {
	min  slog.Level
	next slog.Handler
}

func (h *levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.next.Enabled(ctx, l)
}
func (h *levelHandler) Handle(ctx context.Context, r slog.Record) error { return h.next.Handle(ctx, r) }
func (h *levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &levelHandler{min: h.min, next: h.next.WithAttrs(as)}
}
func (h *levelHandler) WithGroup(n string) slog.Handler {
	return &levelHandler{min: h.min, next: h.next.WithGroup(n)}
}

// refuseRemoteUnary answers every unary call on the remote port
// Unimplemented. Members only use the Receive stream; the library's unary
// handlers (ListProcesses, GetProcessDiagnostics) panic with "implement
// me", which would let anyone reaching the port kill the process.
func refuseRemoteUnary(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
	return nil, status.Error(codes.Unimplemented, "roomcell members only stream messages on this port")
}

// topology serialises this package's writes of the cluster topology
// (MemberList.UpdateClusterTopology, which adds departed members to the
// remote's block list) with its reads of the block list: Proto.Actor's
// BlockList.BlockedMembers reads the set without the lock its Block
// takes, which the race detector reports.
var topology sync.Mutex

// blockedMembers reads the block list under topology.
func blockedMembers(c *pcluster.Cluster) []string {
	topology.Lock()
	defer topology.Unlock()
	return c.GetBlockedMembers().ToSlice()
}

// updateTopology publishes a member view under topology.
func updateTopology(c *pcluster.Cluster, ms []*pcluster.Member) {
	topology.Lock()
	defer topology.Unlock()
	c.MemberList.UpdateClusterTopology(ms)
}
