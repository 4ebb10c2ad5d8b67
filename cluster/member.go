package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/hyapp/roomcell/configs"
)

// Options configure one member.
type Options struct {
	Config configs.ClusterConfig
	Kinds  []*pcluster.Kind
	Logger *slog.Logger
	// LibraryLogLevel is the level Proto.Actor's own logs pass at
	// (default Warn: it is chatty at Info).
	LibraryLogLevel slog.Level
	// MeterProvider, when set, is installed as the global OTel provider
	// before the actor system exists: Proto.Actor takes its instruments
	// from the global provider, and without one it leaks memory per actor.
	MeterProvider metric.MeterProvider
	// Agent lets several single-provider members in one process see each
	// other (tests). Nil = a private agent: a one-member cluster.
	Agent *test.InMemAgent
}

// Member is a started cluster member.
type Member struct {
	System  *actor.ActorSystem
	Cluster *pcluster.Cluster
	logger  *slog.Logger
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
	if o.MeterProvider != nil {
		otel.SetMeterProvider(o.MeterProvider)
	}
	libLogger := slog.New(&levelHandler{min: o.LibraryLogLevel, next: o.Logger.Handler()}).With("lib", "protoactor")
	sysOpts := []actor.ConfigOption{
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return libLogger }),
		actor.WithDeadLetterRequestLogging(false),
	}
	if o.MeterProvider != nil {
		sysOpts = append(sysOpts, actor.WithMetricProviders(o.MeterProvider))
	}
	system := actor.NewActorSystem(sysOpts...)

	provider, err := newProvider(o)
	if err != nil {
		return nil, err
	}
	cfg := o.Config
	var remoteOpts []remote.ConfigOption
	if cfg.AdvertisedHost != "" {
		remoteOpts = append(remoteOpts, remote.WithAdvertisedHost(cfg.AdvertisedHost))
	}
	ccfg := pcluster.Configure(cfg.Name, provider, disthash.New(),
		remote.Configure(cfg.Host, cfg.Port, remoteOpts...),
		pcluster.WithKinds(o.Kinds...),
		pcluster.WithRequestTimeout(cfg.RequestTimeout),
	)
	c := pcluster.New(system, ccfg)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cluster: start member: %v", r)
		}
	}()
	c.StartMember()
	m = &Member{System: system, Cluster: c, logger: o.Logger}
	o.Logger.Info("cluster member started", "cluster", cfg.Name, "provider", cfg.Provider,
		"address", system.Address(), "member_id", system.ID)
	return m, nil
}

func newProvider(o Options) (pcluster.ClusterProvider, error) {
	cfg := o.Config
	switch cfg.Provider {
	case configs.ProviderSingle:
		agent := o.Agent
		if agent == nil {
			agent = test.NewInMemAgent()
		}
		return test.NewTestProvider(agent), nil
	case configs.ProviderAutomanaged:
		return automanaged.NewWithConfig(cfg.RefreshInterval, cfg.AutomanagedPort, cfg.AutomanagedHosts...), nil
	case configs.ProviderEtcd:
		p, err := etcd.NewWithConfig(cfg.EtcdBaseKey, clientv3.Config{Endpoints: cfg.EtcdEndpoints, DialTimeout: 3 * time.Second})
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd provider: %w", err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("cluster: unknown provider %q", cfg.Provider)
}

// WaitReady blocks until this member sees at least one member hosting
// kinds (itself included), or ctx ends. Right after StartMember the member
// list can be empty and every request fails fast.
func (m *Member) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for m.Cluster.MemberList.Length() == 0 {
		select {
		case <-ctx.Done():
			return errors.New("cluster: no members visible before deadline")
		case <-t.C:
		}
	}
	return nil
}

// Stop leaves the cluster. graceful=true deregisters and lets local grains
// stop (they flush snapshots in Stopping); it takes a few seconds.
func (m *Member) Stop(graceful bool) {
	m.Cluster.Shutdown(graceful)
	m.logger.Info("cluster member stopped", "graceful", graceful)
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
