package mysql

import (
	"context"
	"database/sql"
	"log/slog"

	"github.com/hyapp/roomcell/configs"
)

// prober is the store's probe: one connection of its own, outside the
// store's pool. When the server stops answering, every connection of the
// pool may be held by a call waiting on it, and when it answers slowly
// under load the pool may have none to spare: a probe through the pool
// would then measure the pool, not the server.
type prober struct {
	db *sql.DB
}

// newProber builds the probe's one-connection pool (it connects on first
// use); nil when the pool cannot be built, and Probe then asks through the
// store's pool.
func newProber(cfg configs.MySQLConfig, log *slog.Logger) *prober {
	db, _, err := newPool(cfg, cfg.RoomDatabase, cfg.QueryTimeout, log, sessionInit)
	if err != nil {
		return nil
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return &prober{db: db}
}

// Probe asks the room database's server one ping within ctx, on the
// probe's own connection: nil when it answered. The node's store gate
// (actors/storegate) asks it to tell a server that stopped answering
// from a busy one, with a deadline far under the store calls' timeout.
func (s *Store) Probe(ctx context.Context) error {
	if err := ready(ctx); err != nil {
		return err
	}
	db := s.db
	if s.probe != nil {
		db = s.probe.db
	}
	if err := db.PingContext(ctx); err != nil {
		return s.wrap("probe", err)
	}
	return nil
}

func (p *prober) close() {
	if p != nil {
		_ = p.db.Close()
	}
}
