package backend

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/shardmap"
)

// Want says which stores besides the room store to open.
type Want struct {
	// Wallet opens the wallet's own store (the wallet runs in process).
	Wallet bool
	// Notice opens the notice delivery table and the owner-outbox readers
	// (the process runs the notice role).
	Notice bool
}

// Stores is every store a process opened. Fields it did not want are nil.
type Stores struct {
	// Rooms are the room stores, one per room database in the shard
	// map's order (RoomShards.Key(i)): one unless mysql.room_dbs is set.
	// Room is Rooms[0], the store of the first database of the map.
	Rooms      []persistence.Store
	RoomShards *shardmap.Map
	// RoomsPending[i] is true when room database i (never mysql.dsn's)
	// did not answer at open: Rooms[i] is then a *mysql.Store of
	// mysql.OpenUnconnected, neither migrated nor reached; its user
	// calls Attach until the database answers. nil when none is pending.
	RoomsPending []bool
	Room         persistence.Store
	Wallet       persistence.WalletStore
	Notice       persistence.NoticeStore
	// WalletOutbox and RoomOutbox are what the notice workers scan. On
	// MySQL they read the configured wallet and room databases through the
	// notice pool; on go-memdb they are this process's own wallet and room
	// stores, so WalletOutbox is nil when the wallet is not in process.
	WalletOutbox persistence.WalletOutboxReader
	RoomOutbox   persistence.RoomOutboxReader

	closers []func() error
}

// Open opens the stores of cfg.Store.Kind. On MySQL with auto_migrate it
// migrates every database first. With notice.mq.room_outbox on, new
// room_outbox rows also wait for the MQ fanout (persistence.OutboxMQStore). On error, what was opened is closed again.
func Open(ctx context.Context, cfg configs.Config, want Want, log *slog.Logger) (_ *Stores, err error) {
	if log == nil {
		log = slog.Default()
	}
	s := &Stores{}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	switch cfg.Store.Kind {
	case configs.StoreMySQL:
		// The MySQL stores name their component (persistence/mysql) on
		// every line they write.
		err = s.openMySQL(ctx, cfg, want, cfg.Notice.MQ.RoomOutboxOn(), log)
	case configs.StoreMemdb:
		s.openMemdb(want, cfg.Notice.MQ.RoomOutboxOn())
	default:
		err = errors.New("store.kind: unknown backend " + cfg.Store.Kind)
	}
	if err != nil {
		return nil, err
	}
	if s.RoomShards == nil {
		s.Rooms, s.RoomShards = []persistence.Store{s.Room}, shardmap.Single(cfg.Cluster.Shards)
	}
	return s, nil
}

func (s *Stores) openMemdb(want Want, mqOn bool) {
	var roomOpts []memdb.Option
	if mqOn {
		roomOpts = append(roomOpts, memdb.WithOutboxMQ())
	}
	room := memdb.New(roomOpts...)
	s.Room = room
	s.closers = append(s.closers, room.Close)
	if want.Wallet {
		ws := memdb.NewWalletStore()
		s.Wallet, s.WalletOutbox = ws, ws
		s.closers = append(s.closers, ws.Close)
	}
	if want.Notice {
		ns := memdb.NewNoticeStore()
		s.Notice, s.RoomOutbox = ns, room
		s.closers = append(s.closers, ns.Close)
	}
}

// openMySQL opens a room store per room database of the shard map (each
// with its own pool and group committer; mysql.Open migrates each with
// auto_migrate), then the wallet and notice stores on their one server.
func (s *Stores) openMySQL(ctx context.Context, full configs.Config, want Want, mqOn bool, log *slog.Logger) error {
	cfg := full.MySQL
	if cfg.AutoMigrate {
		if err := mysql.MigrateAll(ctx, cfg); err != nil {
			return err
		}
	}
	rm, err := full.RoomShardMap()
	if err != nil {
		return err
	}
	// The databases are opened at once: one that does not answer costs
	// the start its dial and query timeouts once, not once per database.
	type opened struct {
		store   *mysql.Store
		pending bool
		err     error
	}
	res := make([]opened, len(rm.Configs))
	var wg sync.WaitGroup
	for i, rc := range rm.Configs {
		l := log
		if !rm.Single() {
			l = log.With("room_db", rm.Keys[i])
		}
		wg.Go(func() {
			room, err := mysql.Open(ctx, rc, mysql.WithLogger(l), mysql.WithOutboxMQ(mqOn))
			if err != nil && rm.Keys[i] != configs.DefaultRoomDB && mysql.Unreachable(err) {
				// Only this database's rooms need it: they wait for it
				// while the others serve. mysql.dsn's server is required
				// (wallet, notice tables, MigrateAll).
				l.Warn("room database unreachable at start: its rooms are refused until it answers", "error", err)
				room, err = mysql.OpenUnconnected(rc, mysql.WithLogger(l), mysql.WithOutboxMQ(mqOn))
				res[i].pending = err == nil
			}
			res[i].store, res[i].err = room, err
		})
	}
	wg.Wait()
	var rooms []*mysql.Store
	for _, r := range res {
		if r.store != nil {
			s.closers = append(s.closers, r.store.Close)
		}
	}
	for i, r := range res {
		if r.err != nil {
			if !rm.Single() {
				return persistence.InRoomDB(rm.Keys[i], r.err)
			}
			return r.err
		}
		if r.pending {
			if s.RoomsPending == nil {
				s.RoomsPending = make([]bool, len(rm.Keys))
			}
			s.RoomsPending[i] = true
		}
		s.Rooms, rooms = append(s.Rooms, r.store), append(rooms, r.store)
	}
	s.Room, s.RoomShards = s.Rooms[0], shardmap.New(rm)
	if want.Wallet {
		ws, err := mysql.OpenWalletStore(ctx, cfg.Wallet(), mysql.WithLogger(log))
		if err != nil {
			return err
		}
		s.Wallet = ws
		s.closers = append(s.closers, ws.Close)
	}
	if want.Notice {
		ns, err := mysql.OpenNoticeStore(ctx, cfg, mysql.WithLogger(log))
		if err != nil {
			return err
		}
		s.Notice, s.WalletOutbox, s.RoomOutbox = ns, ns.WalletOutbox(), ns.RoomOutbox()
		s.closers = append(s.closers, ns.Close)
		if len(rm.Keys) > 1 || rm.Keys[0] != configs.DefaultRoomDB {
			// The room notice worker reads every room database, each
			// on its own (roomnotice.PartsScanner): mysql.dsn's through
			// the notice pool, the others through their room store's
			// pool.
			all := shardmap.RoomOutboxes{Keys: rm.Keys}
			for i, k := range rm.Keys {
				var r persistence.RoomOutboxReader = rooms[i].RoomOutbox()
				if k == configs.DefaultRoomDB {
					r = ns.RoomOutbox()
				}
				all.Readers = append(all.Readers, r)
			}
			s.RoomOutbox = all
		}
	}
	return nil
}

// Close closes every store, the last opened first, and returns their
// errors joined. Closing twice is harmless.
func (s *Stores) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}
