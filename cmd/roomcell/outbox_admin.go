package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hyapp/roomcell/persistence"
)

// roomOutboxes is the operators' view of room_outbox over every room
// database (roomctl outbox): lists and stats merge the databases, a row
// named by event_id is looked up in each until found. The other
// OutboxStore methods are the first database's (the admin server calls
// none of them). An admin call is rare and small, so asking every
// database is fine; a database that does not answer fails the call,
// naming it, rather than showing a partial list as the whole.
type roomOutboxes struct {
	persistence.OutboxStore
	dbs []*roomDB
}

func (o roomOutboxes) each(ctx context.Context, f func(*roomDB) error) error {
	for _, db := range o.dbs {
		if err := f(db); err != nil {
			return persistence.InRoomDB(db.key, err)
		}
	}
	return nil
}

// ListOutbox merges the databases' rows in their order (created_at_ms,
// event_id), at most f.Limit of them.
func (o roomOutboxes) ListOutbox(ctx context.Context, f persistence.OutboxFilter) ([]persistence.OutboxRow, error) {
	var rows []persistence.OutboxRow
	err := o.each(ctx, func(db *roomDB) error {
		r, err := db.store.ListOutbox(ctx, f)
		rows = append(rows, r...)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(rows, func(a, b persistence.OutboxRow) int {
		return cmp.Or(cmp.Compare(a.CreatedAtMs, b.CreatedAtMs), cmp.Compare(a.Envelope.EventID, b.Envelope.EventID))
	})
	if f.Limit > 0 && len(rows) > f.Limit {
		rows = rows[:f.Limit]
	}
	return rows, nil
}

// OutboxStats sums the databases' counts; the oldest pending row is the
// oldest of any.
func (o roomOutboxes) OutboxStats(ctx context.Context) (persistence.OutboxStats, error) {
	var sum persistence.OutboxStats
	err := o.each(ctx, func(db *roomDB) error {
		s, err := db.store.OutboxStats(ctx)
		sum.Pending, sum.Parked, sum.MQPending = sum.Pending+s.Pending, sum.Parked+s.Parked, sum.MQPending+s.MQPending
		if s.OldestCreatedAtMs != 0 && (sum.OldestCreatedAtMs == 0 || s.OldestCreatedAtMs < sum.OldestCreatedAtMs) {
			sum.OldestCreatedAtMs = s.OldestCreatedAtMs
		}
		return err
	})
	return sum, err
}

// holder is the database holding eventID.
func (o roomOutboxes) holder(ctx context.Context, eventID string) (*roomDB, persistence.OutboxRow, error) {
	for _, db := range o.dbs {
		row, err := db.store.GetOutbox(ctx, eventID)
		if err == nil {
			return db, row, nil
		}
		if !errors.Is(err, persistence.ErrNotFound) {
			return nil, row, persistence.InRoomDB(db.key, err)
		}
	}
	return nil, persistence.OutboxRow{}, fmt.Errorf("outbox row %s: %w", eventID, persistence.ErrNotFound)
}

func (o roomOutboxes) GetOutbox(ctx context.Context, eventID string) (persistence.OutboxRow, error) {
	_, row, err := o.holder(ctx, eventID)
	return row, err
}

func (o roomOutboxes) RequeueOutbox(ctx context.Context, eventID string, nowMs int64) error {
	db, _, err := o.holder(ctx, eventID)
	if err != nil {
		return err
	}
	return db.store.RequeueOutbox(ctx, eventID, nowMs)
}

func (o roomOutboxes) SkipOutbox(ctx context.Context, eventID, by, reason string, nowMs int64) error {
	db, _, err := o.holder(ctx, eventID)
	if err != nil {
		return err
	}
	return db.store.SkipOutbox(ctx, eventID, by, reason, nowMs)
}

// outboxAdminStore is what the OutboxAdmin RPC reads and changes: the
// room store with one database, every database's with several.
func (a *App) outboxAdminStore() persistence.OutboxStore {
	if !a.multiRoomDB() {
		return a.store
	}
	return roomOutboxes{OutboxStore: a.store, dbs: a.roomDBs}
}
