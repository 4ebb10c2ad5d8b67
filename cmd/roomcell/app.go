package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	grainkind "github.com/hyapp/roomcell/cluster/kind"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/actors/departures"
	"github.com/hyapp/roomcell/actors/directory"
	"github.com/hyapp/roomcell/actors/purge"
	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/roomlikes"
	"github.com/hyapp/roomcell/actors/seatdeadline"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/actors/wallet"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/internal/connlimit"
	"github.com/hyapp/roomcell/internal/ratelimit"
	"github.com/hyapp/roomcell/ownership"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/backend"
	"github.com/hyapp/roomcell/persistence/shardmap"
)

// App is one running roomcell process.
type App struct {
	cfg      configs.Config
	log      *slog.Logger
	registry *metricsRegistry

	// stores is every store this process opened; store is its room store.
	stores  *backend.Stores
	store   persistence.Store
	closers []func()          // run before the stores close, in reverse order (IM fake, MQ, ...)
	fakeIM  *imfake.Server    // dev mode's fake Tencent IM, nil with the real one
	imPub   *roomim.Publisher // the IM publisher (room events, bans, the ban reconcile)
	// fakeTRTC is dev mode's fake TRTC (trtc off); nil otherwise.
	fakeTRTC *trtcfake.Server
	// roomDBs are the room databases of the shard map with their
	// workers (roomdbs.go); roomShards says which holds a roomgrain.
	roomDBs    []*roomDB
	roomShards *shardmap.Map
	// workerHealth lists polling workers waiting for their restart.
	workerHealth *supervise.Health
	workerSup    *supervise.Supervisor
	// directory is the room directory (Redis, or memdb in dev); hosted
	// lists the rooms active on this node for the presence worker.
	directory      persistence.Directory
	hosted         *directory.Hosted
	closeDirectory func() error
	guesses        roomgrain.PasswordGuesses // the rooms' password-guess buckets, beside the directory
	wallet         *wallet.Service           // nil when the wallet is remote
	remoteWallet   *grpcapi.WalletClient     // set when wallet.addr is
	mq             mqClient                  // the room_outbox topic (JetStream or RocketMQ), when notice.mq is on
	notices        noticeParts
	member         *cluster.Member
	owners         ownership.Table // room ownership (shard leases); also the room clients' owner feed
	workers        []worker

	// purge is the retention worker's service (purge.go).
	purge *purge.Service

	connMetrics *connlimit.Metrics // the listeners' (listen)
	grpcServer  *grpc.Server
	grpcExtra   []grpc.ServerOption // a test's server options (testHooks)
	watcher     *roomfeed.Watcher   // WatchRoom streams of this node; ended first on drain
	gateway     *grpcapi.Gateway    // HTTP/JSON client API (gateway.addr); nil when off
	health      *health.Server
	grpcLis     net.Listener
	httpServer  *http.Server
	httpLis     net.Listener

	// readiness probes the store, membership and lease for /readyz.
	readiness *readiness

	// traces is the tracer provider when tracing is on (tracing.go);
	// untrace uninstalls it.
	traces  *sdktrace.TracerProvider
	untrace func()

	ready    atomic.Bool
	draining atomic.Bool
	shutdown atomic.Bool
	// started and stopped list the start-up and shutdown steps in the
	// order they ran; the log and the lifecycle tests read them.
	started []string
	stopped []string
}

func (a *App) began(name string) {
	a.started = append(a.started, name)
	a.log.Debug("start step done", "step", name)
}

func (a *App) step(name string) {
	a.stopped = append(a.stopped, name)
	a.log.Info("shutdown step done", "step", name)
}

// worker is a supervised background actor that must stop before gRPC and
// the store do.
type worker struct {
	name string
	stop func()
}

// GRPCAddr is the address gRPC listens on (useful with port 0).
func (a *App) GRPCAddr() string { return a.grpcLis.Addr().String() }

// HTTPAddr is the address of the ops endpoints.
func (a *App) HTTPAddr() string { return a.httpLis.Addr().String() }

// Start brings the process up in the order of seed 000 (docs/seeds.md):
// storage, IM publisher, wallet → cluster member → ops HTTP (/readyz still
// failing) → workers (presence → outbox relay → notice) → gRPC Serve →
// ready. Workers start before gRPC so the first command ever accepted
// already has its compensation path running. On error everything started
// so far is stopped again.
func Start(ctx context.Context, cfg configs.Config, log *slog.Logger, dev bool) (*App, error) {
	return start(ctx, cfg, log, dev, testHooks{})
}

// testHooks are what a test may add to a process: spans, when set, takes
// the traces instead of OTLP; grpc are more server options (a stats
// handler timing RPCs at the server).
type testHooks struct {
	spans sdktrace.SpanExporter
	grpc  []grpc.ServerOption
}

// start is Start with a test's hooks.
func start(ctx context.Context, cfg configs.Config, log *slog.Logger, dev bool, hooks testHooks) (_ *App, err error) {
	if err := cfg.CheckStart(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log, registry: newMetricsRegistry(), grpcExtra: hooks.grpc}
	defer func() {
		if err != nil {
			a.Shutdown()
		}
	}()
	if err := a.startTracing(ctx, hooks.spans); err != nil { // tracing.go
		return nil, err
	}

	// Proto.Actor takes its instruments from the global OTel provider;
	// it must exist before the actor system or actors leak memory.
	exporter, err := otelprom.New(otelprom.WithRegisterer(a.registry))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(otelResource()))

	want := backend.Want{Wallet: cfg.Wallet.Addr == "", Notice: cfg.HasRole(configs.RoleNotice)}
	if a.stores, err = backend.Open(ctx, cfg, want, log); err != nil {
		return nil, err
	}
	a.store = a.stores.Room
	if err = a.openRoomDBs(); err != nil {
		return nil, err
	}
	if err = a.registerPoolMetrics(); err != nil {
		return nil, err
	}
	pub, err := a.openPublisher(ctx, dev)
	if err != nil {
		return nil, err
	}
	a.imPub = pub
	roomPub, err := a.roomPublisher(ctx, pub)
	if err != nil {
		return nil, err
	}
	gifts, err := a.openWallet(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.openNotice(); err != nil {
		return nil, err
	}

	dirDeps, err := a.openDirectory(ctx)
	if err != nil {
		return nil, err
	}
	// Only room nodes host room grains; a notice-only node joins no room
	// placement.
	owners, err := cluster.NewOwnership(cfg.Cluster, cfg.NodeID, cfg.HasRole(configs.RoleRoom), log) // ownership names its component
	if err != nil {
		return nil, err
	}
	a.owners = owners
	ownMetrics, err := ownership.NewMetrics(a.registry)
	if err != nil {
		return nil, err
	}
	if t, ok := owners.(interface{ SetMetrics(*ownership.Metrics) }); ok {
		t.SetMetrics(ownMetrics) // etcd leases; dev's static view loses none
	}
	var kinds []*pcluster.Kind
	if cfg.HasRole(configs.RoleRoom) {
		likeMetrics, err := roomlikes.NewMetrics(a.registry)
		if err != nil {
			return nil, err
		}
		props, err := a.roomGrainProps(roomgrain.Deps{
			Publisher: roomPub, Gifts: gifts, Config: cfg.Room,
			Logger: log.With("component", "room"), NodeID: cfg.NodeID, Lease: owners, Guesses: a.guesses, Joins: directory.NewJoinClock(),
			// What follows a room, built here once for the node.
			Observers: []roomgrain.NewObserver{departures.Observe(), seatdeadline.Observe(), directory.New(dirDeps),
				roomfeed.New(roomfeed.Config{StoreTimeout: cfg.Room.StoreTimeout, Retention: cfg.Retention.CommandLog, Logger: log.With("component", "room")}).Observe(),
				roomlikes.Observe(roomlikes.Config{Window: cfg.Room.LikeWindow, Metrics: likeMetrics})},
		})
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, grainkind.New(roomgrain.Kind, props))
	}
	a.member, err = cluster.Start(cluster.Options{
		Config: cfg.Cluster, NodeID: cfg.NodeID, Kinds: kinds, Logger: log.With("component", "cluster"),
		MeterProvider: meters, Registerer: a.registry, Ownership: owners,
	})
	if err != nil {
		return nil, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = a.member.WaitReady(readyCtx)
	cancel()
	if err != nil {
		return nil, err
	}

	rc := cfg.HTTP.Readiness
	if a.readiness, err = newReadiness(a.readinessProbes(), rc.ProbeInterval, rc.ProbeTimeout, log.With("component", "readiness"), a.registry); err != nil {
		return nil, err
	}
	a.readiness.start()
	if err = a.serveHTTP(); err != nil {
		return nil, err
	}
	a.reportFakeTRTC()
	if err = a.startWorkers(workerInputs{pub: roomPub, im: pub}); err != nil {
		return nil, err
	}
	if err = a.serveGRPC(); err != nil {
		return nil, err
	}
	a.began("grpc")
	a.ready.Store(true)
	a.began("ready")
	log.Info("roomcell serving", "grpc_addr", a.GRPCAddr(), "http_addr", a.HTTPAddr(),
		"store", cfg.Store.Kind, "cluster_provider", cfg.Cluster.Provider, "roles", cfg.Roles, "dev", dev,
		"presence_stale_after", cfg.Presence.StaleAfter)
	if a.fakeIM != nil {
		log.Info("fake Tencent IM: POST /debug/fake-im/outage?for=30s on the HTTP address makes it fail that long",
			"url", "http://"+a.HTTPAddr()+"/debug/fake-im/outage?for=30s")
	}
	return a, nil
}

func (a *App) serveGRPC() error {
	grpcAddr, _ := a.cfg.ServingAddrs()
	lis, err := a.listen("grpc", grpcAddr, a.cfg.GRPC.Limits.ListenerLimits)
	if err != nil {
		return err
	}
	a.grpcLis = lis
	opts, err := a.grpcOptions()
	if err != nil {
		return err
	}
	l := a.cfg.GRPC.Limits
	opts.Conn = grpcapi.ConnOptions{MaxIdle: l.MaxConnectionIdle, MaxAge: l.MaxConnectionAge, MaxAgeGrace: l.MaxConnectionAgeGrace,
		Handshake: l.HandshakeTimeout, PingAfter: l.KeepaliveTime, PingTimeout: l.KeepaliveTimeout, MinPingInterval: l.KeepaliveMinTime,
		MaxStreams: uint32(l.MaxConcurrentStreams)}
	opts.Extra = append(opts.Extra, a.grpcExtra...)
	a.grpcServer, a.health = grpcapi.NewServer(opts)
	backend := a.roomClient()
	rs := grpcapi.NewRoomServer(backend, a.log.With("component", "grpc"), a.cfg.GRPC.CommandTimeout)
	watchMetrics, err := roomfeed.NewWatchMetrics(a.registry)
	if err != nil {
		return err
	}
	a.watcher = &roomfeed.Watcher{Client: roomfeed.Client{Client: backend}, Buffer: a.cfg.Watch.Buffer, CheckInterval: a.cfg.Watch.CheckInterval,
		Metrics: watchMetrics, Logger: a.log.With("component", "watch")}
	rs.SetEvents(grpcapi.RoomEventsOf(roomfeed.Client{Client: backend}, a.watcher), a.cfg.Watch.MaxStreams)
	if a.directory != nil {
		rs.SetDirectory(a.directory)
	}
	gifts := make([]*v1.Gift, len(a.cfg.Gifts))
	for i, g := range a.cfg.Gifts {
		gifts[i] = &v1.Gift{GiftId: g.ID, Price: g.Price, Heat: g.Heat}
	}
	rs.SetGifts(gifts)
	tickets, err := a.openTickets()
	if err != nil {
		return err
	}
	if tickets != nil {
		rs.SetTickets(tickets)
	}
	rs.SetLimiter(ratelimit.New(a.cfg.RateLimits))
	likeStreamMetrics, err := grpcapi.NewLikeStreamMetrics(a.registry)
	if err != nil {
		return err
	}
	rs.SetLikeStreams(grpcapi.LikeStreamOptions{Max: a.cfg.GRPC.MaxLikeStreams, Idle: a.cfg.GRPC.LikeStreamIdle, Metrics: likeStreamMetrics})
	grpcapi.RegisterRoomService(a.grpcServer, rs)
	a.registerServices()
	if un := grpcapi.UnclassifiedMethods(a.grpcServer); len(un) > 0 {
		return fmt.Errorf("grpc: methods without an access class in grpcapi's table: %v", un)
	}
	opts.Metrics.InitializeMetrics(a.grpcServer)
	go func() {
		// Large replies share writes with the replies answered beside them
		// (grpcapi, batchwrites.go).
		if err := a.grpcServer.Serve(grpcapi.BatchWrites(lis)); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			a.log.Error("grpc serve", "error", err)
		}
	}()
	if a.cfg.Gateway.Addr != "" {
		// The client port's connection caps hold on its HTTP/JSON twin.
		glis, lerr := a.listen("gateway", a.cfg.Gateway.Addr, a.cfg.GRPC.Limits.ListenerLimits)
		if lerr != nil {
			return lerr
		}
		gw := a.cfg.Gateway
		a.gateway, err = grpcapi.StartGateway(a.grpcServer, grpcapi.GatewayOptions{Addr: gw.Addr, Listener: glis,
			TLS: a.cfg.GRPC.TLS.Enabled(), ClientTokens: opts.ClientTokens, OperatorTokens: opts.OperatorTokens,
			MaxBodyBytes: gw.MaxBodyBytes, ReadHeaderTimeout: gw.ReadHeaderTimeout, ReadTimeout: gw.ReadTimeout,
			WriteTimeout: gw.WriteTimeout, IdleTimeout: gw.IdleTimeout, Logger: a.log.With("component", "gateway"), Tracing: opts.Tracing})
		if err != nil {
			return fmt.Errorf("gateway.addr %s: %w", a.cfg.Gateway.Addr, err)
		}
		a.log.Info("http/json gateway serving", "gateway_addr", a.gateway.Addr())
	}
	return nil
}

func (a *App) serveHTTP() error {
	_, httpAddr := a.cfg.ServingAddrs()
	lis, err := a.listen("http", httpAddr, a.cfg.HTTP.Limits.ListenerLimits)
	if err != nil {
		return err
	}
	a.httpLis = lis
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		// Ready means "this node can serve commands": not while starting,
		// draining, or while the cluster member is joining or rejoining
		// (commands would fail fast then). A background worker waiting
		// for its restart does not stop commands: it is a metric
		// (roomcell_worker_restarts_total, roomcell_workers_down) and an
		// ERROR line, not an unready node; a bug that panics every relay
		// on one row would otherwise empty the Service of every node.
		// What a command does need (the room store, membership, the shard
		// lease) is probed in the background (readiness.go): this answer
		// never waits on a dependency.
		if !a.ready.Load() || a.draining.Load() || !a.member.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if why := a.readiness.failing(time.Now()); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		if dbs := a.readiness.degraded(); len(dbs) > 0 {
			// Ready: the other databases' rooms are served here.
			fmt.Fprintln(w, "ready; degraded: "+strings.Join(dbs, ", ")+" failing (those rooms are refused)")
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	if err := a.mountCallbacks(mux); err != nil {
		return err
	}
	if a.fakeIM != nil {
		mux.HandleFunc("POST /debug/fake-im/outage", a.fakeIMOutage)
	}
	if a.cfg.HTTP.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	a.httpServer = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: a.cfg.HTTP.Limits.ReadTimeout, IdleTimeout: a.cfg.HTTP.Limits.IdleTimeout}
	go func() {
		if err := a.httpServer.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("http serve", "error", err)
		}
	}()
	return nil
}

// Shutdown stops the process in the order of seed 000 (docs/seeds.md):
// drain (NOT_SERVING) → stop workers (each waits for its in-flight
// publish) → gRPC GracefulStop → leave the cluster (grains snapshot) →
// close the stores. It is safe on a partly started App.
func (a *App) Shutdown() {
	if a.shutdown.Swap(true) {
		return
	}
	a.draining.Store(true)
	if a.readiness != nil {
		a.readiness.close()
	}
	if a.health != nil {
		a.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	}
	a.step("drain")
	if a.watcher != nil {
		// Streams end now, each with its resume seq: GracefulStop would
		// wait for them, and clients resume on another node.
		a.watcher.Close()
		a.step("watch")
	}
	if a.gateway != nil {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.GRPC.ShutdownTimeout)
		_ = a.gateway.Shutdown(ctx)
		cancel()
		a.step("gateway")
	}
	for i := len(a.workers) - 1; i >= 0; i-- {
		w := a.workers[i]
		w.stop()
		a.step("worker " + w.name)
	}
	if a.grpcServer != nil {
		done := make(chan struct{})
		go func() { a.grpcServer.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(a.cfg.GRPC.ShutdownTimeout):
			a.log.Warn("grpc graceful stop timed out; stopping hard")
			a.grpcServer.Stop()
		}
		a.step("grpc")
	}
	if a.member != nil {
		a.member.Stop(true)
		a.step("cluster")
	}
	if a.httpServer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = a.httpServer.Shutdown(ctx)
		cancel()
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	if a.stores != nil {
		if err := a.stores.Close(); err != nil {
			a.log.Warn("store close", "error", err)
		}
		a.step("store")
	}
	// Seed 000 closes Redis last: rooms write to the directory until the
	// cluster member has stopped them.
	if a.closeDirectory != nil {
		if err := a.closeDirectory(); err != nil {
			a.log.Warn("directory close", "error", err)
		}
		a.step("directory")
	}
	a.stopTracing()
	a.log.Info("roomcell stopped")
}

// clientOwners is the owner feed the room clients follow. A single node
// owns every room and its view does not change once started: following
// it cost every command a goroutine and a channel (roomgrain.Client.attempt)
// for a change that cannot come.
func (a *App) clientOwners() roomgrain.Owners {
	if a.cfg.Cluster.Provider == configs.ProviderSingle {
		return nil
	}
	return a.owners
}

// listen opens a listener capped by limits (connlimit): one client, or a
// few, cannot hold the process's file descriptors without a token.
func (a *App) listen(name, addr string, limits configs.ListenerLimits) (net.Listener, error) {
	if a.connMetrics == nil {
		m, err := connlimit.NewMetrics(a.registry)
		if err != nil {
			return nil, err
		}
		a.connMetrics = m
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listen %s: %w", name, addr, err)
	}
	return connlimit.Wrap(lis, name, connlimit.Limits{MaxConnections: limits.MaxConnections, MaxPerAddress: limits.MaxConnectionsPerAddress},
		a.connMetrics, a.log.With("component", name)), nil
}
