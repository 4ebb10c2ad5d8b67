package memdb

import (
	"context"

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
	t := s.outbox
	t.mu.Lock()
	defer t.mu.Unlock()
	var claimed []*outboxEntry
	t.mq.Scan(func(e *outboxEntry) bool {
		if e.mqLockUntilMs() <= nowMs {
			claimed = append(claimed, e)
		}
		return len(claimed) < limit
	})
	// Written after the walk: a B-tree must not be walked across writes
	// to it.
	out := make([]persistence.OutboxRow, 0, len(claimed))
	for _, e := range claimed {
		row := e.row()
		row.MQLockedBy, row.MQLockUntilMs = owner, nowMs+leaseMs
		t.put(newOutboxEntry(e.Envelope, row))
		out = append(out, row)
	}
	persistence.GroupByRoom(out)
	return out, nil
}

// mqUpdate applies change to the MQ-pending rows of eventIDs under one
// lock; unknown ids and other rows are skipped.
func (s *Store) mqUpdate(ctx context.Context, eventIDs []string, change func(*persistence.OutboxRow)) error {
	return s.updateRows(ctx, eventIDs, func(r *persistence.OutboxRow) bool {
		if r.MQStatus != persistence.OutboxMQPending {
			return false
		}
		change(r)
		return true
	})
}

// MarkOutboxMQPublished implements persistence.OutboxMQStore.
func (s *Store) MarkOutboxMQPublished(ctx context.Context, eventIDs []string, nowMs int64) error {
	return s.mqUpdate(ctx, eventIDs, func(r *persistence.OutboxRow) {
		r.MQStatus, r.MQPublishedAtMs = persistence.OutboxMQPublished, nowMs
		r.MQLockedBy, r.MQLockUntilMs = "", 0
	})
}

// ReleaseOutboxMQ implements persistence.OutboxMQStore.
func (s *Store) ReleaseOutboxMQ(ctx context.Context, eventIDs []string) error {
	return s.mqUpdate(ctx, eventIDs, func(r *persistence.OutboxRow) {
		r.MQLockedBy, r.MQLockUntilMs = "", 0
	})
}

// ParkOutboxMQ implements persistence.OutboxMQStore.
func (s *Store) ParkOutboxMQ(ctx context.Context, eventID string) error {
	if _, err := s.GetOutbox(ctx, eventID); err != nil {
		return err
	}
	return s.mqUpdate(ctx, []string{eventID}, func(r *persistence.OutboxRow) {
		r.MQStatus = persistence.OutboxMQParked
		r.MQLockedBy, r.MQLockUntilMs = "", 0
	})
}
