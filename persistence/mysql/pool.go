package mysql

import (
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// pool is what the wallet and notice stores hold alike: the connection
// pool, whether the store opened it (and so closes it), the DSN to scrub
// from error messages, the bound of one operation and the logger.
type pool struct {
	db      *sql.DB
	dsn     string // for scrubbing error messages; never printed
	timeout time.Duration
	log     *slog.Logger
	ownDB   bool
	closed  atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

// newStorePool wraps db for the store named store: queryTimeout 0 means 3s, a
// nil log slog.Default.
func newStorePool(db *sql.DB, queryTimeout time.Duration, log *slog.Logger, store string) pool {
	if queryTimeout <= 0 {
		queryTimeout = 3 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return pool{db: db, timeout: queryTimeout, log: log.With("component", "persistence/mysql", "store", store)}
}

// DB is the store's pool, for tools, metrics and tests.
func (p *pool) DB() *sql.DB { return p.db }

// Close closes the connection pool if the store's Open function opened
// it. Later calls fail with ErrUnavailable.
func (p *pool) Close() error {
	p.closed.Store(true)
	p.closeOnce.Do(func() {
		if p.ownDB {
			p.closeErr = p.db.Close()
		}
	})
	return p.closeErr
}
