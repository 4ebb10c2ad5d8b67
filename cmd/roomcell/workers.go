package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/notice/noticeapp"
	"github.com/hyapp/roomcell/actors/presence"
	"github.com/hyapp/roomcell/actors/purge"
	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/actors/wallet/giftsettle"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/persistence"
)

// workerSpec is one background worker of this process. startWorkers
// ranges over workerList: a worker whose enabled says yes is started (a
// start step "worker <name>"), and stopped in reverse order by Shutdown,
// before gRPC and the stores, waiting at most stopTimeout. A new worker is
// its package plus one entry here.
type workerSpec struct {
	name string
	// enabled: this process's roles and configuration run the worker.
	enabled func(a *App) bool
	// start spawns the worker under sup; a nil stopper means there is
	// nothing to run after all (the gift reconciler without a wallet).
	start func(a *App, sup *supervise.Supervisor, in workerInputs) (stopper, error)
	// stopTimeout bounds the worker's stop (its in-flight item's timeout
	// plus a few seconds for the store).
	stopTimeout func(a *App) time.Duration
	// perRoomDB: one worker per room database (roomdbs.go), started with
	// in.db set and named name@key when there are several.
	perRoomDB bool
}

// workerInputs are what the start steps before the workers built for them.
type workerInputs struct {
	pub delivery.Publisher // the rooms' outbox publisher (IM, maybe with the MQ kick)
	im  *roomim.Publisher  // the IM publisher, for the notice workers
	db  *roomDB            // the room database of a perRoomDB worker
}

// stopper is a started worker: every polling worker's
// *supervise.Poller[T], and the notice service.
type stopper interface {
	Stop(timeout time.Duration) error
}

// stopFunc is a stopper with a step of its own before the worker's stop.
type stopFunc func(time.Duration) error

func (f stopFunc) Stop(d time.Duration) error { return f(d) }

func fixed(d time.Duration) func(*App) time.Duration { return func(*App) time.Duration { return d } }

// publishStop: a publish in flight gets its publish_timeout.
func publishStop(a *App) time.Duration { return a.cfg.OutboxWorker.PublishTimeout + 5*time.Second }

// workerList is every background worker, in start order: seed 000's
// (the presence stale worker, then the outbox relay and its MQ fanout),
// seed 003's notice workers, retention, the gift reconciler.
var workerList = []workerSpec{
	{
		name:        presence.WorkerName,
		enabled:     func(a *App) bool { return a.cfg.HasRole(configs.RoleRoom) && a.cfg.Presence.On() },
		start:       startPresence,
		stopTimeout: fixed(10 * time.Second),
	},
	{
		name:        relay.WorkerName,
		enabled:     func(a *App) bool { return a.cfg.HasRole(configs.RoleRelay) && a.cfg.OutboxWorker.On() },
		start:       startRelay,
		stopTimeout: publishStop,
		perRoomDB:   true,
	},
	{
		// Beside the relay when notice.mq.room_outbox is on: its own
		// progress per row, so the IM channel and the topic never wait
		// for each other.
		name: relay.MQWorkerName,
		enabled: func(a *App) bool {
			return a.cfg.HasRole(configs.RoleRelay) && a.cfg.OutboxWorker.On() && a.mq != nil
		},
		start:       startMQFanout,
		stopTimeout: publishStop,
		perRoomDB:   true,
	},
	{
		// Seed 003's room IM bridge consumer group, when
		// notice.mq.room_outbox.im_bridge is on: the topic's room events,
		// in order per room, to the rooms' IM groups, skipping those the
		// room's IM channel already sent.
		name: relay.IMBridgeWorkerName,
		enabled: func(a *App) bool {
			return a.cfg.HasRole(configs.RoleRelay) && a.cfg.OutboxWorker.On() && a.mq != nil && a.cfg.Notice.MQ.RoomOutbox.IMBridge.Enabled
		},
		start:       startIMBridge,
		stopTimeout: fixed(10 * time.Second),
	},
	{
		name:        "notice",
		enabled:     func(a *App) bool { return a.notices.store != nil },
		start:       startNotice,
		stopTimeout: fixed(10 * time.Second),
	},
	{
		name:    purge.WorkerName,
		enabled: func(a *App) bool { return a.purge != nil && a.cfg.Retention.On() },
		start: func(a *App, sup *supervise.Supervisor, in workerInputs) (stopper, error) {
			if in.db.purge == nil {
				return nil, nil
			}
			return purge.RunAs(sup, in.db.purge, a.workerName(purge.WorkerName, in.db))
		},
		stopTimeout: fixed(10 * time.Second),
		perRoomDB:   true,
	},
	{
		// On room nodes only, over the wallet in process or the remote one:
		// the void fence is the room store's, and a wallet-only process
		// never voids gifts in a room store that may not be the rooms'
		// (actors/wallet/doc.go, "Who settles").
		name:        giftsettle.WorkerName,
		enabled:     func(a *App) bool { return a.cfg.HasRole(configs.RoleRoom) && a.cfg.Wallet.GiftReconciler.On() },
		start:       startGiftReconciler,
		stopTimeout: fixed(10 * time.Second),
	},
	{
		name:        imBanReconcileWorker,
		enabled:     imBanReconcileOn,
		start:       startIMBanReconcile,
		stopTimeout: fixed(35 * time.Second),
	},
}

// startWorkers spawns the supervised background actors of the roles this
// process runs (workerList). Each registers its stop in a.workers;
// Shutdown stops them before gRPC and the store.
func (a *App) startWorkers(in workerInputs) error {
	sys := a.member.System
	unsubscribe := supervise.LogEvents(sys, a.log.With("component", "supervisor"))
	a.workers = append(a.workers, worker{name: "supervisor-log", stop: unsubscribe})
	sup, err := supervise.NewWorkerSupervisor(sys, "workers", supervise.RestartPolicy{}, a.registry, a.log.With("component", "supervisor"))
	if err != nil {
		return err
	}
	a.workerHealth, a.workerSup = sup.Health(), sup
	health := sup.Health()
	if err := a.registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "roomcell_workers_down",
		Help: "Background workers waiting for their restart after a panic; commands are still served (not part of /readyz).",
	}, func() float64 { return float64(len(health.Down())) })); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	a.workers = append(a.workers, worker{name: "workers", stop: func() { _ = sup.Stop(5 * time.Second) }})
	if err := a.openPurge(); err != nil {
		return err
	}
	for _, spec := range workerList {
		if !spec.enabled(a) {
			continue
		}
		dbs := []*roomDB{nil}
		if spec.perRoomDB {
			dbs = a.roomDBs
		}
		for _, db := range dbs {
			if db != nil && !db.attached.Load() {
				// Started by attachPending once the database answers.
				db.deferred = append(db.deferred, spec)
				continue
			}
			in.db = db
			w, err := a.startWorker(spec, sup, in)
			if err != nil {
				return err
			}
			if w != nil {
				a.workers = append(a.workers, *w)
				a.began("worker " + w.name)
			}
		}
	}
	for _, db := range a.roomDBs {
		if !db.attached.Load() {
			in.db = db
			a.workers = append(a.workers, a.attachPending(sup, in))
			a.began("worker " + a.workerName("room_db_attach", db))
		}
	}
	return nil
}

// startWorker starts one worker of spec (in.db's when perRoomDB); a nil
// result means there was nothing to run. The worker's stop waits at most
// its stopTimeout and logs a failure.
func (a *App) startWorker(spec workerSpec, sup *supervise.Supervisor, in workerInputs) (*worker, error) {
	name := spec.name
	if in.db != nil {
		name = a.workerName(name, in.db)
	}
	w, err := spec.start(a, sup, in)
	if err != nil {
		return nil, fmt.Errorf("worker %s: %w", name, err)
	}
	if w == nil {
		return nil, nil
	}
	timeout := spec.stopTimeout(a)
	return &worker{name: name, stop: func() {
		if err := w.Stop(timeout); err != nil {
			a.log.Warn("worker stop", "worker", name, "error", err)
		}
	}}, nil
}

// dbLog is a per-database worker's logger: room_db=<key> with several
// databases.
func (a *App) dbLog(component string, db *roomDB) *slog.Logger {
	l := a.log.With("component", component)
	if a.multiRoomDB() {
		l = l.With("room_db", db.key)
	}
	return l
}

func startPresence(a *App, sup *supervise.Supervisor, _ workerInputs) (stopper, error) {
	pm, err := presence.NewMetrics(a.registry)
	if err != nil {
		return nil, err
	}
	return presence.Start(sup, presence.Deps{Directory: a.directory, Hosted: a.hosted,
		Rooms:  a.roomClient(),
		Config: a.cfg.Presence, NodeID: a.cfg.NodeID, Logger: a.log.With("component", "presence"), Metrics: pm})
}

// startRelay starts in.db's relay.
func startRelay(a *App, sup *supervise.Supervisor, in workerInputs) (stopper, error) {
	metrics, err := relay.NewMetrics(in.db.reg)
	if err != nil {
		return nil, err
	}
	r, err := relay.Start(sup, relay.Deps{
		Store: in.db.store, Publisher: in.pub, Config: a.cfg.OutboxWorker, NodeID: a.cfg.NodeID,
		Logger: a.dbLog("relay", in.db), Metrics: metrics, Name: a.workerName(relay.WorkerName, in.db),
	})
	if err != nil {
		return nil, err
	}
	in.db.relay.Store(r)
	return r, nil
}

// startMQFanout starts in.db's MQ fanout and publishes it for the rooms'
// kicks while it runs.
func startMQFanout(a *App, sup *supervise.Supervisor, in workerInputs) (stopper, error) {
	metrics, err := relay.NewMQMetrics(in.db.reg)
	if err != nil {
		return nil, err
	}
	f, err := relay.StartMQ(sup, relay.MQDeps{
		Store: in.db.store, MQ: a.mq, Topic: a.cfg.Notice.MQ.RoomOutbox.Topic, Config: a.cfg.OutboxWorker,
		NodeID: a.cfg.NodeID, Logger: a.dbLog("relay_mq", in.db), Metrics: metrics, Name: a.workerName(relay.MQWorkerName, in.db),
	})
	if err != nil {
		return nil, err
	}
	db := in.db
	db.mqFanout.Store(f)
	return stopFunc(func(d time.Duration) error {
		db.mqFanout.Store(nil)
		return f.Stop(d)
	}), nil
}

// startIMBridge subscribes the IM bridge's consumer group to the
// room_outbox topic.
func startIMBridge(a *App, _ *supervise.Supervisor, in workerInputs) (stopper, error) {
	rb := a.cfg.Notice.MQ.RoomOutbox
	deps := relay.IMBridgeDeps{Store: a.store, Publisher: in.im, PublishTimeout: a.cfg.OutboxWorker.PublishTimeout,
		NodeID: a.cfg.NodeID, Logger: a.log.With("component", "im_bridge")}
	if a.multiRoomDB() {
		deps.StoreOf = func(k persistence.RoomKey) relay.IMBridgeStore { return a.roomStoreOf(k) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := a.mq.Subscribe(ctx, mq.Subscription{Topic: rb.Topic, Group: rb.IMBridge.ConsumerGroup, Ordered: true,
		MaxRedeliver: rb.MaxRedeliver,
		Handler: func(ctx context.Context, m mq.Message) error {
			err := relay.BridgeIM(ctx, deps, m.Data)
			if errors.Is(err, relay.ErrCorruptEnvelope) {
				return fmt.Errorf("%w: %v", mq.ErrDrop, err)
			}
			return err
		}})
	if err != nil {
		return nil, fmt.Errorf("notice.mq.room_outbox.im_bridge: %w", err)
	}
	return stopFunc(func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return c.Stop(ctx)
	}), nil
}

// startNotice starts the notice workers and the MQ consumer.
func startNotice(a *App, sup *supervise.Supervisor, in workerInputs) (stopper, error) {
	metrics, err := notice.NewMetrics(a.registry)
	if err != nil {
		return nil, err
	}
	var sub mq.Subscriber
	if a.mq != nil {
		sub = a.mq
	}
	svc, err := noticeapp.Start(sup, noticeapp.Deps{
		Config: a.cfg.Notice, Store: a.notices.store, Modules: a.noticeModules(),
		Publisher: in.im, MQ: sub, NodeID: a.cfg.NodeID, Logger: a.log, Metrics: metrics,
	})
	if err != nil {
		return nil, err
	}
	a.notices.service = svc
	return svc, nil
}

func startGiftReconciler(a *App, sup *supervise.Supervisor, _ workerInputs) (stopper, error) {
	var wal giftsettle.Wallet
	switch {
	case a.wallet != nil:
		wal = a.wallet
	case a.remoteWallet != nil:
		wal = a.remoteWallet
	default:
		return nil, nil
	}
	metrics, err := giftsettle.NewMetrics(a.registry)
	if err != nil {
		return nil, err
	}
	return giftsettle.Start(sup, giftsettle.Deps{
		Wallet: wal, Rooms: roomVoids{a}, Config: a.cfg.Wallet.GiftReconciler,
		Timeout: a.cfg.Room.StoreTimeout, Logger: a.log.With("component", "gift_reconciler"), Metrics: metrics,
	})
}
