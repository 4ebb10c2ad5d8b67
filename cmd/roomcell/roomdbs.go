package main

import (
	"context"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/purge"
	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/room"
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
	// reg registers the database's worker metrics: the process registry,
	// labelled room_db=<key> when there are several databases.
	reg      prometheus.Registerer
	relay    *supervise.Poller[relay.RunNowResult]
	mqFanout atomic.Pointer[supervise.Poller[relay.MQResult]] // while it runs; the rooms' kicks read it
	purge    *purge.Service                                   // nil: no purge service
}

// openRoomDBs lists the room databases backend.Open opened.
func (a *App) openRoomDBs() {
	a.roomShards = a.stores.RoomShards
	for i, s := range a.stores.Rooms {
		db := &roomDB{key: a.roomShards.Key(i), store: s, reg: a.registry}
		if len(a.stores.Rooms) > 1 {
			db.reg = prometheus.WrapRegistererWith(prometheus.Labels{"room_db": db.key}, a.registry)
		}
		a.roomDBs = append(a.roomDBs, db)
	}
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
// takes its shard's store when it starts.
// Each database's rooms count their publishes on its registerer (with
// several databases, labelled room_db like its relay's: one family, one
// label set).
func (a *App) roomGrainProps(d room.Deps) (*actor.Props, error) {
	if !a.multiRoomDB() {
		m, err := room.NewPublishMetrics(a.roomDBs[0].reg)
		if err != nil {
			return nil, err
		}
		d.Store, d.PublishMetrics = a.store, m
		return room.GrainProps(d), nil
	}
	dbs := make([]room.ShardDB, len(a.roomDBs))
	for i, db := range a.roomDBs {
		m, err := room.NewPublishMetrics(db.reg)
		if err != nil {
			return nil, err
		}
		dbs[i] = room.ShardDB{Store: db.store, PublishMetrics: m}
	}
	return room.ShardedGrainProps(d, dbs, a.roomShards.Index), nil
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
		if db.relay != nil {
			db.relay.Kick()
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
