package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/outboxmarks"
	"github.com/hyapp/roomcell/actors/purge"
	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/storegate"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// roomDB is one room database of the shard map (mysql.room_dbs,
// mysql.room_shards) and the workers that run on it: each database has
// its own store (pool and group committer), relay, MQ fanout and purge,
// so a database that is down or slow holds up only its own rooms' rows.
type roomDB struct {
	key   string
	store persistence.Store
	// cfg is the database's MySQL config (mysql with its DSN and
	// database); zero on go-memdb.
	cfg configs.MySQLConfig
	// attached is false while a database that did not answer at start
	// has not come back: its rooms are refused (their store gate stays
	// closed) and its workers wait (attachPending).
	attached atomic.Bool
	// reg registers the database's worker metrics: the process registry,
	// labelled room_db=<key> when there are several databases.
	reg      prometheus.Registerer
	relay    atomic.Pointer[supervise.Poller[relay.RunNowResult]]
	mqFanout atomic.Pointer[supervise.Poller[relay.MQResult]] // while it runs; the rooms' kicks read it
	purge    *purge.Service                                   // nil: no purge service
	// deferred are the per-database workers waiting for the database
	// to be attached (startWorkers, attachPending).
	deferred []workerSpec
}

// openRoomDBs lists the room databases backend.Open opened.
func (a *App) openRoomDBs() error {
	a.roomShards = a.stores.RoomShards
	var cfgs []configs.MySQLConfig
	if a.cfg.Store.Kind == configs.StoreMySQL {
		rm, err := a.cfg.RoomShardMap()
		if err != nil {
			return err
		}
		cfgs = rm.Configs
	}
	for i, s := range a.stores.Rooms {
		db := &roomDB{key: a.roomShards.Key(i), store: s, reg: a.registry}
		if i < len(cfgs) {
			db.cfg = cfgs[i]
		}
		db.attached.Store(a.stores.RoomsPending == nil || !a.stores.RoomsPending[i])
		if len(a.stores.Rooms) > 1 {
			db.reg = prometheus.WrapRegistererWith(prometheus.Labels{"room_db": db.key}, a.registry)
		}
		a.roomDBs = append(a.roomDBs, db)
	}
	return nil
}

// multiRoomDB reports whether rooms are spread over several databases.
func (a *App) multiRoomDB() bool { return len(a.roomDBs) > 1 }

// workerName is a per-database worker's name: the plain name with one
// database (as before the shard map), name@key with several.
func (a *App) workerName(name string, db *roomDB) string {
	if !a.multiRoomDB() {
		return name
	}
	return name + "@" + db.key
}

// roomStoreOf is the store of key's database.
func (a *App) roomStoreOf(key persistence.RoomKey) persistence.Store {
	return a.roomDBs[a.roomShards.IndexOf(key)].store
}

// roomGrainProps builds the room grains over the room databases: a room
// takes its shard's store, and that database's store gate and mark
// batcher (made here, once per database), when it starts.
// Each database's rooms count their publishes on its registerer (with
// several databases, labelled room_db like its relay's: one family, one
// label set).
func (a *App) roomGrainProps(d roomgrain.Deps) (*actor.Props, error) {
	if !a.multiRoomDB() {
		m, err := roomgrain.NewPublishMetrics(a.roomDBs[0].reg)
		if err != nil {
			return nil, err
		}
		d.Store, d.PublishMetrics = a.store, m
		d.StoreGate = storegate.New(a.store, gateSettings(d.Config), d.Logger)
		if err := d.StoreGate.Register(a.roomDBs[0].reg); err != nil {
			return nil, err
		}
		d.Marks = outboxmarks.New(a.store, time.Now, d.Config.StoreTimeout, d.Logger, roomgrain.OutboxWorker)
		return roomgrain.GrainProps(d), nil
	}
	dbs := make([]roomgrain.ShardDB, len(a.roomDBs))
	for i, db := range a.roomDBs {
		m, err := roomgrain.NewPublishMetrics(db.reg)
		if err != nil {
			return nil, err
		}
		// A gate per database: one that stops answering refuses only its
		// own rooms' writes, naming it.
		gate := storegate.New(db.store, gateSettings(d.Config), d.Logger)
		gate.ForDatabase(db.key, db.attached.Load)
		if err := gate.Register(db.reg); err != nil {
			return nil, err
		}
		marks := outboxmarks.New(db.store, time.Now, d.Config.StoreTimeout, d.Logger, roomgrain.OutboxWorker)
		dbs[i] = roomgrain.ShardDB{Store: db.store, StoreGate: gate, Marks: marks, PublishMetrics: m}
	}
	return roomgrain.ShardedGrainProps(d, dbs, a.roomShards.Index), nil
}

// kickMQFanouts wakes every database's MQ fanout (a room handed over an
// event; the room's database is not known here, and a kick is cheap).
func (a *App) kickMQFanouts() {
	for _, db := range a.roomDBs {
		if f := db.mqFanout.Load(); f != nil {
			f.Kick()
		}
	}
}

// kickRelays wakes every database's relay (an operator's retry); false
// when no relay runs here.
func (a *App) kickRelays() bool {
	kicked := false
	for _, db := range a.roomDBs {
		if r := db.relay.Load(); r != nil {
			r.Kick()
			kicked = true
		}
	}
	return kicked
}

// roomVoids routes the gift reconciler's void fence to the room's
// database.
type roomVoids struct{ a *App }

func (r roomVoids) VoidGift(ctx context.Context, key persistence.RoomKey, commandID string, nowMs int64) (bool, error) {
	return r.a.roomStoreOf(key).VoidGift(ctx, key, commandID, nowMs)
}

// migrateRoomDBs migrates the room schema into every room database of
// the shard map besides mysql.dsn's (MigrateAll did that one).
func migrateRoomDBs(ctx context.Context, cfg configs.Config, migrate func(context.Context, configs.MySQLConfig) error) error {
	rm, err := cfg.RoomShardMap()
	if err != nil {
		return err
	}
	for i, c := range rm.Configs {
		if rm.Keys[i] == configs.DefaultRoomDB {
			continue
		}
		if err := migrate(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// attacher is a store that may have been opened without reaching its
// server (mysql.OpenUnconnected).
type attacher interface {
	Attach(ctx context.Context, cfg configs.MySQLConfig) error
}

// Backoff of attachPending between attempts.
const (
	attachFirstWait = 250 * time.Millisecond
	attachMaxWait   = 5 * time.Second
	// attachTimeout bounds one attempt, migrations included.
	attachTimeout = time.Minute
)

// attachPending runs for a room database that did not answer when the
// process started: it asks it again, with backoff, until it answers
// (migrating it first with mysql.auto_migrate, as a start would have),
// then marks it attached (its rooms' store gate opens on its next probe)
// and starts its deferred workers (relay, MQ fanout, purge). The
// returned worker's stop ends the attempts and stops what it started.
func (a *App) attachPending(sup *supervise.Supervisor, in workerInputs) worker {
	db := in.db
	name := a.workerName("room_db_attach", db)
	log := a.dbLog("room_db_attach", db)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var started []worker
	done := make(chan struct{})
	go func() {
		defer close(done)
		st, ok := db.store.(attacher)
		if !ok {
			log.Error("room database cannot be attached: not a MySQL store")
			return
		}
		since := time.Now()
		wait := attachFirstWait
		for attempt := 1; ; attempt++ {
			actx, acancel := context.WithTimeout(ctx, attachTimeout)
			err := st.Attach(actx, db.cfg)
			acancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			if attempt == 1 || attempt%20 == 0 {
				log.Warn("room database not attached yet; its rooms are refused", "attempts", attempt, "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, attachMaxWait)
		}
		db.attached.Store(true)
		log.Info("room database answers: its rooms and workers start", "waited", time.Since(since).Round(time.Millisecond))
		for _, spec := range db.deferred {
			mu.Lock()
			if ctx.Err() != nil {
				mu.Unlock()
				return
			}
			w, err := a.startWorker(spec, sup, in)
			if w != nil {
				started = append(started, *w)
			}
			mu.Unlock()
			if err != nil {
				log.Error("room database worker did not start", "error", err)
			}
		}
	}()
	return worker{name: name, stop: func() {
		mu.Lock()
		cancel()
		mu.Unlock()
		<-done
		for i := len(started) - 1; i >= 0; i-- {
			started[i].stop()
			a.step("worker " + started[i].name)
		}
	}}
}

// gateSettings are the store gates' thresholds from the room settings.
func gateSettings(c configs.RoomConfig) storegate.Settings {
	return storegate.Settings{StallAfter: c.StoreStallAfter, ProbeTimeout: c.StoreProbeTimeout}
}
