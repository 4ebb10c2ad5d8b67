package memdb

import (
	"context"
	"fmt"
	"math"

	"github.com/hyapp/roomcell/persistence"
)

// The MQ fanout's side of room_outbox (persistence.OutboxMQStore): only
// the MQ fields of a row change here, never Status or the IM lease.

// ClaimOutboxMQ implements persistence.OutboxMQStore.
func (s *Store) ClaimOutboxMQ(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	it, err := txn.LowerBound(tableOutbox, indexMQ, int64(math.MinInt64), "")
	if err != nil {
		return nil, fmt.Errorf("memdb: claim outbox mq: %w", err)
	}
	var claimed []*outboxEntry
	for raw := it.Next(); raw != nil && len(claimed) < limit; raw = it.Next() {
		e := raw.(*outboxEntry)
		if e.MQStatus != persistence.OutboxMQPending {
			break
		}
		if e.MQLockUntilMs > nowMs {
			continue
		}
		claimed = append(claimed, e)
	}
	// Written after the walk: go-memdb iterators must not run across
	// writes to the table they walk.
	out := make([]persistence.OutboxRow, 0, len(claimed))
	for _, e := range claimed {
		row := e.row()
		row.MQLockedBy, row.MQLockUntilMs = owner, nowMs+leaseMs
		if err := txn.Insert(tableOutbox, newOutboxEntry(e.Envelope, row)); err != nil {
			return nil, fmt.Errorf("memdb: claim outbox mq %s: %w", e.EventID, err)
		}
		out = append(out, row)
	}
	txn.Commit()
	persistence.GroupByRoom(out)
	return out, nil
}

// mqUpdate applies change to the MQ-pending rows of eventIDs in one
// transaction; unknown ids and other rows are skipped.
func (s *Store) mqUpdate(ctx context.Context, op string, eventIDs []string, change func(*persistence.OutboxRow)) error {
	return s.updateRows(ctx, op, eventIDs, func(r *persistence.OutboxRow) bool {
		if r.MQStatus != persistence.OutboxMQPending {
			return false
		}
		change(r)
		return true
	})
}

// MarkOutboxMQPublished implements persistence.OutboxMQStore.
func (s *Store) MarkOutboxMQPublished(ctx context.Context, eventIDs []string, nowMs int64) error {
	return s.mqUpdate(ctx, "mark outbox mq published", eventIDs, func(r *persistence.OutboxRow) {
		r.MQStatus, r.MQPublishedAtMs = persistence.OutboxMQPublished, nowMs
		r.MQLockedBy, r.MQLockUntilMs = "", 0
	})
}

// ReleaseOutboxMQ implements persistence.OutboxMQStore.
func (s *Store) ReleaseOutboxMQ(ctx context.Context, eventIDs []string) error {
	return s.mqUpdate(ctx, "release outbox mq", eventIDs, func(r *persistence.OutboxRow) {
		r.MQLockedBy, r.MQLockUntilMs = "", 0
	})
}

// ParkOutboxMQ implements persistence.OutboxMQStore.
func (s *Store) ParkOutboxMQ(ctx context.Context, eventID string) error {
	if _, err := s.GetOutbox(ctx, eventID); err != nil {
		return err
	}
	return s.mqUpdate(ctx, "park outbox mq", []string{eventID}, func(r *persistence.OutboxRow) {
		r.MQStatus = persistence.OutboxMQParked
		r.MQLockedBy, r.MQLockUntilMs = "", 0
	})
}
