package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/hyapp/roomcell/actors/directory"
	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/actors/wallet/giftdebit"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/delivery/trtc"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/redis"
)

// openPublisher builds the IM path: the real Tencent IM client when
// tencent_im.enabled, otherwise the same client pointed at an in-process
// fake Tencent IM (dev mode: its messages are logged and listed at its
// /debug/messages page, served on loopback; the client reaches it without
// the socket).
func (a *App) openPublisher(ctx context.Context, dev bool) (*roomim.Publisher, error) {
	imLog := a.log.With("component", "im")
	imCfg := a.cfg.TencentIM
	imMetrics, err := tencentim.NewMetrics(a.registry)
	if err != nil {
		return nil, err
	}
	imOpts := []tencentim.Option{tencentim.WithLogger(imLog), tencentim.WithMetrics(imMetrics)}
	if !imCfg.Enabled {
		fake, fakeCfg, err := imfake.StartDev(imLog.With("fake", true))
		if err != nil {
			return nil, fmt.Errorf("fake tencent im: %w", err)
		}
		a.fakeIM = fake
		a.closers = append(a.closers, func() { _ = fake.Close() })
		fakeCfg.BatchFormat = imCfg.BatchFormat // what the clients read is not the fake's to choose
		// The quotas are the client's, as against Tencent: a dev node held
		// to 200 create_group calls/s took 500 s to open 100k rooms.
		fakeCfg.RatePerSecond, fakeCfg.GroupRatePerSecond = imCfg.RatePerSecond, imCfg.GroupRatePerSecond
		imCfg = fakeCfg
		// The client calls the fake in process (same handler, checks and
		// faults) rather than over loopback HTTP: a server round trip per
		// message was a test double's cost in every dev-mode figure.
		imOpts = append(imOpts, tencentim.WithHTTPClient(&http.Client{Transport: fake.Transport()}))
	}
	client, err := tencentim.New(imCfg, imOpts...)
	if err != nil {
		return nil, err
	}
	opts := []roomim.Option{roomim.WithLogger(imLog), roomim.WithBatchFormat(imCfg.BatchFormat),
		// A kick's or close's steps done are kept in its outbox row, in the
		// room's database, so a retry on any node does only what is left.
		roomim.WithEffectSteps(func(k persistence.RoomKey) roomim.EffectSteps { return a.roomStoreOf(k) }, a.cfg.Room.StoreTimeout)}
	audio, err := a.openAudio(dev)
	if err != nil {
		return nil, err
	}
	if audio != nil {
		opts = append(opts, roomim.WithAudio(audio))
	}
	if a.cfg.TRTC.EnforceTickets {
		opts = append(opts, roomim.WithTicketEnforcement())
	}
	pub := roomim.New(client, opts...)
	a.closers = append(a.closers, pub.Close)
	return pub, nil
}

// openAudio builds the rooms' audio side for kicks and closes: the TRTC
// client when trtc.enabled; in dev mode a fake TRTC on loopback (its
// calls are logged at Debug), reached in process, so the dev loop runs
// the same effects;
// otherwise none (kicks and closes stop at IM).
func (a *App) openAudio(dev bool) (roomim.Audio, error) {
	log := a.log.With("component", "trtc")
	cfg := a.cfg.TRTC
	opts := []trtc.Option{trtc.WithLogger(log)}
	if !cfg.Enabled {
		if !dev {
			return nil, nil
		}
		fake, err := trtcfake.Start("127.0.0.1:0", trtcfake.WithLogger(log.With("fake", true)))
		if err != nil {
			return nil, fmt.Errorf("fake trtc: %w", err)
		}
		a.fakeTRTC = fake
		a.closers = append(a.closers, func() { _ = fake.Close() })
		a.log.Info("fake TRTC serving", "url", fake.URL())
		cfg = fake.ClientConfig()
		// As the IM client: the fake's handler in process, no socket.
		opts = append(opts, trtc.WithHTTPClient(&http.Client{Transport: fake.Transport()}))
	}
	c, err := trtc.New(cfg, opts...)
	if err != nil {
		return nil, fmt.Errorf("trtc: %w", err)
	}
	return c, nil
}

// openTickets returns the signer of GetJoinTicket: with trtc.sig_key;
// in dev mode without one, the fake TRTC's key (so dev tickets pass the
// fake); otherwise nil (tickets carry the room and the rights unsigned).
func (a *App) openTickets() (*trtc.Tickets, error) {
	cfg := a.cfg.TRTC
	if cfg.SigKey == "" && a.fakeTRTC != nil {
		fc := a.fakeTRTC.ClientConfig()
		cfg.SDKAppID, cfg.SigKey = fc.SDKAppID, fc.SigKey
	}
	if cfg.SigKey == "" {
		return nil, nil
	}
	t, err := trtc.NewTickets(trtc.TicketConfig{SDKAppID: cfg.SDKAppID, SigKey: cfg.SigKey, TTL: cfg.TicketTTL, UserSigTTL: cfg.UserSigTTL})
	if err != nil {
		return nil, fmt.Errorf("trtc.sig_key: %w", err)
	}
	return t, nil
}

// openWallet returns the gift debiter of the room grains: the wallet in
// process over a.stores.Wallet (memdb, or hyapp_wallet on MySQL), or a
// remote WalletService when wallet.addr is set.
func (a *App) openWallet(ctx context.Context) (roomgrain.GiftDebiter, error) {
	if a.cfg.Wallet.Addr != "" {
		opts, err := walletDialOptions(a.cfg.Wallet)
		if err != nil {
			return nil, err
		}
		conn, err := grpc.NewClient(a.cfg.Wallet.Addr, opts...)
		if err != nil {
			return nil, fmt.Errorf("wallet.addr: %w", err)
		}
		a.closers = append(a.closers, func() { _ = conn.Close() })
		a.remoteWallet = grpcapi.NewWalletClient(conn)
		return giftdebit.Remote{W: a.remoteWallet, Timeout: a.cfg.Room.StoreTimeout}, nil
	}
	svc, err := wallet.NewService(a.stores.Wallet, a.cfg.Gifts, a.cfg.Wallet, wallet.WithLogger(a.log.With("component", "wallet")),
		wallet.WithVipPlans(wallet.PlansFromConfig(a.cfg.Wallet.VipPlans)))
	if err != nil {
		return nil, err
	}
	a.wallet = svc
	return giftdebit.New(svc), nil
}

// openDirectory builds the room directory and the rooms' password-guess
// buckets: Redis when redis.enabled, else the embedded go-memdb one. An unreachable Redis is not fatal: rooms are
// the source of truth and re-register when it is back.
func (a *App) openDirectory(ctx context.Context) (directory.Deps, error) {
	ttlPresence, ttlRoom := a.cfg.Directory.PresenceTTL, a.cfg.Directory.RoomTTL
	if a.cfg.Redis.Enabled {
		redisTLS, err := a.cfg.Redis.TLS.Load()
		if err != nil {
			return directory.Deps{}, fmt.Errorf("redis.tls: %w", err)
		}
		if redisTLS != nil {
			// A TLS mistake never heals: refuse to start, as MySQL's does,
			// instead of running without a directory.
			cctx, cancel := context.WithTimeout(ctx, max(a.cfg.Redis.Timeout, 2*time.Second))
			err := redis.CheckTLS(cctx, a.cfg.Redis.Addr, redisTLS)
			cancel()
			if errors.Is(err, redis.ErrTLSMistake) {
				return directory.Deps{}, fmt.Errorf("redis.tls: %w", err)
			}
		}
		rd := redis.Open(a.cfg.Redis, redis.Options{PresenceTTL: ttlPresence, RoomTTL: ttlRoom, TLS: redisTLS})
		pctx, cancel := context.WithTimeout(ctx, a.cfg.Redis.Timeout)
		if err := rd.Ping(pctx); err != nil {
			a.log.Warn("redis directory unreachable; rooms repair it when it is back", "error", err)
		}
		cancel()
		a.directory, a.closeDirectory = rd, rd.Close
		// The password-guess buckets beside it: every node reads the
		// same, so they follow a room that moves.
		a.guesses = rd.Guesses()
	} else {
		md := memdb.NewDirectory(memdb.DirectoryOptions{PresenceTTL: ttlPresence, RoomTTL: ttlRoom})
		a.directory, a.closeDirectory = md, md.Close
		a.guesses = memdb.NewGuesses()
	}
	metrics, err := directory.NewMetrics(a.registry)
	if err != nil {
		return directory.Deps{}, err
	}
	a.hosted = directory.NewHosted()
	dc := a.cfg.Directory
	return directory.Deps{Directory: a.directory, Hosted: a.hosted, RefreshInterval: a.cfg.Presence.RefreshInterval,
		Timeout: dc.Timeout, MaxBacklog: dc.MaxBacklog, ListingGap: dc.ListingGap, Metrics: metrics}, nil
}

// registerServices registers the gRPC services besides RoomService.
func (a *App) registerServices() {
	log := a.log.With("component", "grpc")
	v1.RegisterClusterAdminServer(a.grpcServer, grpcapi.NewClusterAdminServer(a.member))
	if a.imPub != nil {
		v1.RegisterImAdminServer(a.grpcServer, grpcapi.NewImAdminServer(a.roomClient(), a.imPub, log))
	}
	// Over every room database (outbox_admin.go); a retry kicks every
	// database's relay.
	v1.RegisterOutboxAdminServer(a.grpcServer, grpcapi.NewOutboxAdminServer(a.outboxAdminStore(), func(id string) bool {
		return a.kickRelays()
	}, log))
	if a.purge != nil {
		v1.RegisterPurgeAdminServer(a.grpcServer, a.purgeAdmin(log))
	}
	if a.notices.store != nil {
		v1.RegisterNoticeAdminServer(a.grpcServer, grpcapi.NewNoticeAdminServer(a.notices.store, func(source string) bool {
			return a.notices.service.Kick(source) // nil-safe before the workers start
		}, log))
	}
	if a.cfg.HasRole(configs.RoleWallet) && a.wallet != nil {
		v1.RegisterWalletServiceServer(a.grpcServer, grpcapi.NewWalletServer(a.wallet, log))
	}
}

// migrate applies every embedded MySQL schema (room, wallet, notice) to its
// configured database, idempotently.
func migrate(ctx context.Context, cfg configs.Config, log *slog.Logger) error {
	if cfg.MySQL.DSN == "" {
		return errors.New("migrate: mysql.dsn is empty")
	}
	if err := mysql.MigrateAll(ctx, cfg.MySQL); err != nil {
		return err
	}
	if err := migrateRoomDBs(ctx, cfg, func(ctx context.Context, c configs.MySQLConfig) error {
		return mysql.MigrateConfig(ctx, c, mysql.RoomSchema, c.RoomDatabase)
	}); err != nil {
		return err
	}
	log.Info("migrations applied", "schemas", mysql.Schemas())
	return nil
}

// checkMigrations prints, for every embedded schema and every database
// it lives in, whether the database is at this binary's schema; an error
// when one is behind or ahead (roomcell migrate --check).
func checkMigrations(ctx context.Context, cfg configs.Config, out io.Writer) error {
	if cfg.MySQL.DSN == "" {
		return errors.New("migrate --check: mysql.dsn is empty")
	}
	type target struct {
		cfg              configs.MySQLConfig
		schema, database string
	}
	var targets []target
	for _, schema := range mysql.Schemas() {
		database, err := mysql.DatabaseFor(cfg.MySQL, schema)
		if err != nil {
			return err
		}
		targets = append(targets, target{cfg.MySQL, schema, database})
	}
	if err := migrateRoomDBs(ctx, cfg, func(_ context.Context, c configs.MySQLConfig) error {
		targets = append(targets, target{c, mysql.RoomSchema, c.RoomDatabase})
		return nil
	}); err != nil {
		return err
	}
	var off []string
	for _, tg := range targets {
		st, err := mysql.CheckConfig(ctx, tg.cfg, tg.schema, tg.database)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, st.String())
		if !st.UpToDate() {
			off = append(off, tg.schema+" in "+tg.database)
		}
	}
	if len(off) > 0 {
		return fmt.Errorf("migrate --check: not at this binary's schema: %s", strings.Join(off, ", "))
	}
	return nil
}

// fakeIMOutage makes the dev fake Tencent IM fail every call for ?for=
// (default 30s; 0 ends an outage), so a newcomer can watch the central
// path: the room's publish fails, the row stays pending, the relay
// delivers it once the outage ends.
func (a *App) fakeIMOutage(w http.ResponseWriter, r *http.Request) {
	d := 30 * time.Second
	if v := r.URL.Query().Get("for"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 0 {
			http.Error(w, "for: want a duration with a unit, e.g. 30s or 2m", http.StatusBadRequest)
			return
		}
	}
	end := a.fakeIM.FailFor(d)
	a.log.Warn("fake Tencent IM outage", "for", d, "until", end.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "fake Tencent IM fails every call until %s (%s)\n", end.UTC().Format(time.RFC3339), d)
}

// registerPoolMetrics exports each MySQL pool's sql.DBStats (go_sql_*:
// open, in use and idle connections, waits for a connection and their
// time) labelled db_name room (room_<key> for the other room databases
// of a shard map), wallet or notice. go-memdb has no pool.
func (a *App) registerPoolMetrics() error {
	type pooled interface{ DB() *sql.DB }
	type named struct {
		name  string
		store any
		key   string // the room database's key; "" for wallet and notice
	}
	var pools []named
	for _, db := range a.roomDBs {
		name := "room" // one database, or mysql.dsn's: as before the shard map
		if db.key != configs.DefaultRoomDB {
			name = "room_" + db.key
		}
		pools = append(pools, named{name, db.store, db.key})
	}
	for _, s := range append(pools, named{"wallet", a.stores.Wallet, ""}, named{"notice", a.stores.Notice, ""}) {
		p, ok := s.store.(pooled)
		if !ok || p.DB() == nil {
			continue
		}
		if err := a.registry.Register(collectors.NewDBStatsCollector(p.DB(), s.name)); err != nil {
			return fmt.Errorf("metrics of the %s pool: %w", s.name, err)
		}
		// The room store's group commit: batch sizes and transaction times,
		// one series per room database (room_db: its key in mysql.room_dbs,
		// "default" for mysql.dsn).
		if c, ok := s.store.(interface{ Collectors() []prometheus.Collector }); ok && s.key != "" {
			reg := prometheus.WrapRegistererWith(prometheus.Labels{"room_db": s.key}, a.registry)
			for _, col := range c.Collectors() {
				if err := reg.Register(col); err != nil {
					return fmt.Errorf("metrics of the %s store: %w", s.name, err)
				}
			}
		}
	}
	return nil
}
