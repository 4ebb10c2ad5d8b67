package main

import (
	"context"
	"log/slog"

	"github.com/hyapp/roomcell/actors/purge"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
)

// purgeDeps collects the stores of this process that hold purgeable
// tables, and the notice cursors the rules wait for. On MySQL a process
// without the notice role still reads the cursors (and purges delivered
// notices) through a notice store of its own: without the cursors it
// could never purge wallet_outbox or a kick.
func (a *App) purgeDeps(ctx context.Context) (purge.Deps, error) {
	d := purge.Deps{Config: a.cfg.Retention, NodeID: a.cfg.NodeID, Logger: a.log.With("component", "purge")}
	add := func(s any) {
		if p, ok := s.(persistence.Purger); ok {
			d.Purgers = append(d.Purgers, p)
		}
	}
	add(a.stores.Room)
	if a.stores.Wallet != nil {
		add(a.stores.Wallet)
	}
	notices := a.stores.Notice
	if notices == nil && a.cfg.Store.Kind == configs.StoreMySQL {
		ns, err := mysql.OpenNoticeStore(ctx, a.cfg.MySQL, mysql.WithLogger(a.log))
		if err != nil {
			return d, err
		}
		a.closers = append(a.closers, func() { _ = ns.Close() })
		notices = ns
	}
	if notices != nil {
		add(notices)
		d.Positions, _ = notices.(persistence.ConsumerPositions)
	}
	return d, nil
}

// openPurge builds the retention services: the first room database's
// (with the wallet and notice tables), which the PurgeAdmin RPC reads
// even when retention.enabled is off, and one per other room database,
// so a database that hangs holds up only its own purge. Their workers
// are in workerList.
func (a *App) openPurge() error {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.MySQL.DialTimeout+a.cfg.MySQL.QueryTimeout)
	defer cancel()
	deps, err := a.purgeDeps(ctx)
	if err != nil {
		return err
	}
	first := a.roomDBs[0]
	if deps.Metrics, err = purge.NewMetrics(first.reg); err != nil {
		return err
	}
	if a.purge, err = purge.NewService(deps); err != nil {
		return err
	}
	first.purge = a.purge
	for _, db := range a.roomDBs[1:] {
		d := deps
		d.Purgers, d.Logger = nil, a.dbLog("purge", db)
		if p, ok := db.store.(persistence.Purger); ok {
			d.Purgers = []persistence.Purger{p}
		}
		if d.Metrics, err = purge.NewMetrics(db.reg); err != nil {
			return err
		}
		if db.purge, err = purge.NewService(d); err != nil {
			return err
		}
	}
	return nil
}

// purgeAdmin is the PurgeAdmin RPC's server: with several room databases
// it lists every database's room tables (each has its own service).
func (a *App) purgeAdmin(log *slog.Logger) *grpcapi.PurgeAdminServer {
	s := grpcapi.NewPurgeAdminServer(a.purge, a.cfg.NodeID, a.cfg.Retention.On(), log)
	if !a.multiRoomDB() {
		return s
	}
	dbs := make([]grpcapi.PurgeDB, 0, len(a.roomDBs))
	for _, db := range a.roomDBs {
		if db.purge != nil {
			dbs = append(dbs, grpcapi.PurgeDB{Key: db.key, Source: db.purge})
		}
	}
	return s.WithRoomDBs(dbs)
}
