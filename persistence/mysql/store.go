package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// RoomSchema is the name of the room store's embedded schema
// (schema/room/*.sql).
const RoomSchema = "room"

// Store is the MySQL room store: command log, outbox and snapshots in
// cfg.RoomDatabase. It is safe for concurrent use.
type Store struct {
	db  *sql.DB
	dsn string // for scrubbing error messages; never printed
	// queryTimeout (mysql.query_timeout) bounds every call and every
	// group-commit transaction.
	queryTimeout time.Duration
	log          *slog.Logger
	gc           *groupCommitter // nil: one transaction per append
	probe        *prober         // Probe's own connection (probe.go)
	// mqStatus is the MQ status of new outbox rows: pending when the MQ
	// fanout is on (WithOutboxMQ: each row gets its room_outbox_mq row),
	// none otherwise (no room_outbox_mq row).
	mqStatus string

	// beforeCommit, if set, runs before every COMMIT of an append (tests:
	// cut the network or hold a writer there).
	beforeCommit func()

	closeOnce sync.Once
	closeErr  error
}

var _ persistence.Store = (*Store)(nil)

// Room writes must not outlive the writer's right to write (its shard
// lease, cluster.shard_lease_ttl, default 2 s; docs/cluster.md):
//
//   - innodb_lock_wait_timeout 1 s: an append blocked by a row lock (an old
//     owner's open transaction) fails after 1 s instead of InnoDB's 50 s,
//     and only that append fails (writeIsolated);
//   - idle_write_transaction_timeout 2 s (MariaDB 10.3+; the /*M! comment
//     is skipped by MySQL): the server rolls back and disconnects a
//     session that sits idle inside a write transaction, as a process
//     frozen (SIGSTOP, GC, VM pause) between two statements would, so its
//     row locks are gone by the time its lease has expired anywhere else.
//     MySQL 8 has no equivalent; its nearest is the session wait_timeout,
//     which also closes idle pooled connections (docs/cluster.md).
//   - idle_transaction_timeout 2 s (MariaDB 10.3+): the same for a
//     transaction that has only read so far. The outbox claim's locking
//     read holds row locks before its first write; a claimer frozen there
//     held them through a whole 10 s database pause.
var roomSessionInit = append(slices.Clip(sessionInit),
	"SET SESSION innodb_lock_wait_timeout = 1 /*M!100300 , idle_write_transaction_timeout = 2, idle_transaction_timeout = 2 */")

// Option tunes Open.
type Option func(*options)

type options struct {
	log      *slog.Logger
	writers  int
	outboxMQ bool
}

// WithOutboxMQ(true): the room_outbox MQ fanout is on (notice.mq.room_outbox),
// so new outbox rows wait for it (mq_status pending) as well as for IM.
func WithOutboxMQ(on bool) Option { return func(o *options) { o.outboxMQ = on } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithGroupCommitWriters sets how many group-commit transactions may be in
// flight at once (default 2; see docs/benchmarks.md). Ignored when group
// commit is off.
func WithGroupCommitWriters(n int) Option { return func(o *options) { o.writers = n } }

// DefaultGroupCommitWriters: one batch is written while the next one
// fills; more writers measured no faster on two cores.
const DefaultGroupCommitWriters = 2

// Open connects to cfg's server, applies the room schema when
// cfg.AutoMigrate is set, and returns the store. Zero fields of cfg take
// the defaults of configs (so a hand-built config works); an empty DSN is
// read from $ROOMCELL_MYSQL_DSN. A server that does not answer within ctx
// or cfg.DialTimeout+cfg.QueryTimeout is an error wrapping
// persistence.ErrUnavailable; no error or log line carries the password.
func Open(ctx context.Context, cfg configs.MySQLConfig, opts ...Option) (*Store, error) {
	o := options{log: slog.Default(), writers: DefaultGroupCommitWriters}
	for _, opt := range opts {
		opt(&o)
	}
	cfg = withDefaults(cfg)
	if cfg.AutoMigrate {
		if err := migrateConfig(ctx, cfg, RoomSchema, cfg.RoomDatabase, o.log); err != nil {
			return nil, err
		}
	}
	db, err := openDBInit(ctx, cfg, cfg.RoomDatabase, cfg.QueryTimeout, o.log, roomSessionInit)
	if err != nil {
		return nil, err
	}
	if !cfg.AutoMigrate {
		if err := refuseAhead(ctx, db, RoomSchema, cfg.RoomDatabase, o.log); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return newStore(db, cfg, o), nil
}

// OpenUnconnected returns the store of cfg without reaching its server:
// no migration, no ping; the pool connects on first use, and every call
// fails with ErrUnavailable until the server answers. It is for a room
// database of several that was unreachable when the process started
// (its rooms wait for it; the others serve): run Attach before handing
// the store to anyone that writes.
func OpenUnconnected(cfg configs.MySQLConfig, opts ...Option) (*Store, error) {
	o := options{log: slog.Default(), writers: DefaultGroupCommitWriters}
	for _, opt := range opts {
		opt(&o)
	}
	cfg = withDefaults(cfg)
	db, _, err := newPool(cfg, cfg.RoomDatabase, cfg.QueryTimeout, o.log, roomSessionInit)
	if err != nil {
		return nil, err
	}
	return newStore(db, cfg, o), nil
}

// Attach is what Open does on the server before it returns, for a store
// of OpenUnconnected: the room schema when cfg.AutoMigrate is set, then a
// ping of the store's pool. It fails (ErrUnavailable) while the server
// does not answer; call it again later.
func (s *Store) Attach(ctx context.Context, cfg configs.MySQLConfig) error {
	cfg = withDefaults(cfg)
	if cfg.AutoMigrate {
		if err := migrateConfig(ctx, cfg, RoomSchema, cfg.RoomDatabase, s.log); err != nil {
			return err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout+cfg.QueryTimeout)
	defer cancel()
	if err := s.db.PingContext(pctx); err != nil {
		return s.wrap("attach", err)
	}
	if !cfg.AutoMigrate {
		return refuseAhead(pctx, s.db, RoomSchema, cfg.RoomDatabase, s.log)
	}
	return nil
}

func newStore(db *sql.DB, cfg configs.MySQLConfig, o options) *Store {
	redacted := redactedDSN(cfg.DSN, cfg.RoomDatabase)
	s := &Store{db: db, dsn: cfg.DSN, queryTimeout: cfg.QueryTimeout, log: o.log.With("component", "persistence/mysql", "database", cfg.RoomDatabase),
		mqStatus: persistence.OutboxMQNone}
	if o.outboxMQ {
		s.mqStatus = persistence.OutboxMQPending
	}
	s.probe = newProber(cfg, s.log)
	if cfg.GroupCommit.On() {
		s.gc = newGroupCommitter(s, cfg.GroupCommit.MaxBatch, cfg.GroupCommit.Linger, max(1, o.writers))
	}
	s.log.Info("room store open", "dsn", redacted, "group_commit", cfg.GroupCommit.On(),
		"max_batch", cfg.GroupCommit.MaxBatch, "linger", cfg.GroupCommit.Linger, "writers", o.writers,
		"max_open_conns", cfg.MaxOpenConns, "query_timeout", cfg.QueryTimeout)
	return s
}

// DB is the store's pool, for tools and tests that read the tables.
func (s *Store) DB() *sql.DB { return s.db }

// Close stops accepting appends, writes what the group committer already
// queued (each caller still gets its own result), then closes the pool.
// Later calls fail with ErrUnavailable.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.gc != nil {
			s.gc.close()
		}
		s.probe.close()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// errClosed is what a call on a closed store gets.
var errClosed = fmt.Errorf("mysql: store closed: %w", persistence.ErrUnavailable)

// opCtx bounds one store call by the caller's deadline and by
// mysql.query_timeout, whichever comes first.
func (s *Store) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.queryTimeout)
}

// ready is the entry check of every method: a cancelled caller gets its
// context error (in the ErrUnavailable class) before any I/O.
func ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mysql: %w: %w", persistence.ErrUnavailable, err)
	}
	return nil
}

// wrap classifies a driver error of op. A closed pool is ErrUnavailable.
func (s *Store) wrap(op string, err error) error {
	if errors.Is(err, errDBClosed) {
		return fmt.Errorf("mysql: %s: %w", op, errClosed)
	}
	return wrapErr(op, s.dsn, err)
}
