package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc"

	"github.com/hyapp/roomcell/actors/presence"
	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/actors/wallet/giftdebit"
	"github.com/hyapp/roomcell/actors/wallet/giftsettle"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/grpcapi"
	v1 "github.com/hyapp/roomcell/grpcapi/roomcellv1"
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
	imOpts := []tencentim.Option{tencentim.WithLogger(imLog)}
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
		a.log.Info("fake Tencent IM serving", "url", fake.URL(), "messages", fake.URL()+"/debug/messages")
		// The client calls the fake in process (same handler, checks and
		// faults) rather than over loopback HTTP: a server round trip per
		// message was a test double's cost in every dev-mode figure.
		imOpts = append(imOpts, tencentim.WithHTTPClient(&http.Client{Transport: fake.Transport()}))
	}
	client, err := tencentim.New(imCfg, imOpts...)
	if err != nil {
		return nil, err
	}
	pub := roomim.New(client, roomim.WithLogger(imLog), roomim.WithBatchFormat(imCfg.BatchFormat))
	a.closers = append(a.closers, pub.Close)
	return pub, nil
}

// openWallet returns the gift debiter of the room grains: the wallet in
// process over a.stores.Wallet (memdb, or hyapp_wallet on MySQL), or a
// remote WalletService when wallet.addr is set.
func (a *App) openWallet(ctx context.Context) (room.GiftDebiter, error) {
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

// openDirectory builds the room directory: Redis when redis.enabled, else
// the embedded go-memdb one. An unreachable Redis is not fatal: rooms are
// the source of truth and re-register when it is back.
func (a *App) openDirectory(ctx context.Context) (room.DirectoryDeps, error) {
	ttlPresence, ttlRoom := a.cfg.Presence.StaleAfter, 3*a.cfg.Presence.RefreshInterval
	if a.cfg.Redis.Enabled {
		redisTLS, err := a.cfg.Redis.TLS.Load()
		if err != nil {
			return room.DirectoryDeps{}, fmt.Errorf("redis.tls: %w", err)
		}
		rd := redis.Open(a.cfg.Redis, redis.Options{PresenceTTL: ttlPresence, RoomTTL: ttlRoom, TLS: redisTLS})
		pctx, cancel := context.WithTimeout(ctx, a.cfg.Redis.Timeout)
		if err := rd.Ping(pctx); err != nil {
			a.log.Warn("redis directory unreachable; rooms repair it when it is back", "error", err)
		}
		cancel()
		a.directory, a.closeDirectory = rd, rd.Close
	} else {
		md := memdb.NewDirectory(memdb.DirectoryOptions{PresenceTTL: ttlPresence, RoomTTL: ttlRoom})
		a.directory, a.closeDirectory = md, md.Close
	}
	metrics, err := room.NewDirectoryMetrics(a.registry)
	if err != nil {
		return room.DirectoryDeps{}, err
	}
	a.hosted = room.NewHosted()
	return room.DirectoryDeps{Directory: a.directory, Hosted: a.hosted,
		RefreshInterval: a.cfg.Presence.RefreshInterval, Metrics: metrics}, nil
}

// startWorkers spawns the supervised background actors of the roles this
// process runs. Each registers its stop in a.workers; Shutdown stops them
// before gRPC and the store.
func (a *App) startWorkers(pub relay.Publisher, im *roomim.Publisher) error {
	sys := a.member.System
	unsubscribe := supervise.LogEvents(sys, a.log.With("component", "supervisor"))
	a.workers = append(a.workers, worker{name: "supervisor-log", stop: unsubscribe})
	sup, err := supervise.NewWorkerSupervisor(sys, "workers", supervise.RestartPolicy{}, a.registry, a.log.With("component", "supervisor"))
	if err != nil {
		return err
	}
	a.workerHealth = sup.Health()
	a.workers = append(a.workers, worker{name: "workers", stop: func() { _ = sup.Stop(5 * time.Second) }})
	// Seed 000's order: the presence stale worker, then the outbox relay;
	// seed 003's notice workers after them.
	if a.cfg.HasRole(configs.RoleRoom) && a.cfg.Presence.On() {
		pm, err := presence.NewMetrics(a.registry)
		if err != nil {
			return err
		}
		w, err := presence.Start(sup, presence.Deps{Directory: a.directory, Hosted: a.hosted,
			Rooms:  &room.Client{Cluster: a.member.Cluster, AttemptTimeout: a.cfg.Cluster.RequestTimeout, Owners: a.clientOwners()},
			Config: a.cfg.Presence, NodeID: a.cfg.NodeID, Logger: a.log.With("component", "presence"), Metrics: pm})
		if err != nil {
			return err
		}
		a.workers = append(a.workers, worker{name: presence.WorkerName, stop: func() {
			if err := w.Stop(10 * time.Second); err != nil {
				a.log.Warn("presence worker stop", "error", err)
			}
		}})
		a.began("worker " + presence.WorkerName)
	}
	if a.cfg.HasRole(configs.RoleRelay) && a.cfg.OutboxWorker.On() {
		metrics, err := relay.NewMetrics(a.registry)
		if err != nil {
			return err
		}
		r, err := relay.Start(sup, relay.Deps{
			Store: a.store, Publisher: pub, Config: a.cfg.OutboxWorker, NodeID: a.cfg.NodeID,
			Logger: a.log.With("component", "relay"), Metrics: metrics,
		})
		if err != nil {
			return err
		}
		a.relay = r
		timeout := a.cfg.OutboxWorker.PublishTimeout + 5*time.Second
		a.workers = append(a.workers, worker{name: "room_outbox", stop: func() {
			if err := r.Stop(timeout); err != nil {
				a.log.Warn("relay stop", "error", err)
			}
		}})
		a.began("worker room_outbox")
		if err := a.startMQFanout(sup); err != nil {
			return err
		}
	}
	if err := a.startNotice(sup, im); err != nil {
		return err
	}
	if err := a.startPurge(sup); err != nil {
		return err
	}
	return a.startGiftReconciler(sup)
}

// startMQFanout runs the room_outbox MQ fanout beside the relay when
// notice.mq.room_outbox is on: its own worker with its own progress per row,
// so the IM channel and the topic never wait for each other.
func (a *App) startMQFanout(sup *supervise.Supervisor) error {
	if a.jetstream == nil {
		return nil
	}
	metrics, err := relay.NewMQMetrics(a.registry)
	if err != nil {
		return err
	}
	f, err := relay.StartMQ(sup, relay.MQDeps{
		Store: a.store, MQ: a.jetstream, Topic: a.cfg.Notice.MQ.RoomOutbox.Topic, Config: a.cfg.OutboxWorker,
		NodeID: a.cfg.NodeID, Logger: a.log.With("component", "relay_mq"), Metrics: metrics,
	})
	if err != nil {
		return err
	}
	a.mqFanout.Store(f)
	timeout := a.cfg.OutboxWorker.PublishTimeout + 5*time.Second
	a.workers = append(a.workers, worker{name: relay.MQWorkerName, stop: func() {
		a.mqFanout.Store(nil)
		if err := f.Stop(timeout); err != nil {
			a.log.Warn("mq fanout stop", "error", err)
		}
	}})
	a.began("worker " + relay.MQWorkerName)
	return nil
}

// startGiftReconciler runs the gift reconciler on room nodes, over the
// wallet in process or the remote one (wallet.addr): the void fence is
// the room store's, so the reconciler runs beside it, and a wallet-only
// process (no room role) never voids gifts in a room store that may not
// be the rooms' (actors/wallet/doc.go, "Who settles").
func (a *App) startGiftReconciler(sup *supervise.Supervisor) error {
	rc := a.cfg.Wallet.GiftReconciler
	if !a.cfg.HasRole(configs.RoleRoom) || !rc.On() {
		return nil
	}
	var wal giftsettle.Wallet
	switch {
	case a.wallet != nil:
		wal = a.wallet
	case a.remoteWallet != nil:
		wal = a.remoteWallet
	default:
		return nil
	}
	metrics, err := giftsettle.NewMetrics(a.registry)
	if err != nil {
		return err
	}
	w, err := giftsettle.Start(sup, giftsettle.Deps{
		Wallet: wal, Rooms: a.store, After: rc.SettleAfter, Interval: rc.PollInterval, BatchSize: rc.BatchSize,
		Timeout: a.cfg.Room.StoreTimeout, Logger: a.log.With("component", "gift_reconciler"), Metrics: metrics,
	})
	if err != nil {
		return err
	}
	a.workers = append(a.workers, worker{name: giftsettle.WorkerName, stop: func() {
		if err := w.Stop(10 * time.Second); err != nil {
			a.log.Warn("gift reconciler stop", "error", err)
		}
	}})
	return nil
}

// registerServices registers the gRPC services besides RoomService.
func (a *App) registerServices() {
	log := a.log.With("component", "grpc")
	v1.RegisterClusterAdminServer(a.grpcServer, grpcapi.NewClusterAdminServer(a.member))
	v1.RegisterOutboxAdminServer(a.grpcServer, grpcapi.NewOutboxAdminServer(a.store, func(id string) bool {
		if a.relay == nil {
			return false
		}
		a.relay.Kick()
		return true
	}, log))
	if a.purge != nil {
		v1.RegisterPurgeAdminServer(a.grpcServer, grpcapi.NewPurgeAdminServer(a.purge, a.cfg.NodeID, a.cfg.Retention.On(), log))
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
	log.Info("migrations applied", "schemas", mysql.Schemas())
	return nil
}
