package memdb

import (
	"context"
	"math"

	"github.com/hyapp/roomcell/persistence"
)

// The MQ fanout's side of room_outbox (persistence.OutboxMQStore): only
// the MQ fields of a row change here, never Status or the IM lease.

// ClaimOutboxMQ implements persistence.OutboxMQStore room by room, as
// ClaimPendingOutbox does for the IM relay: a room is taken only when
// none of its MQ-pending rows is under a live MQ lease (a claim by time
// let a second fanout take a room's later rows while the first still held
// its earlier ones, and publish them first), and then its lowest rows are
// leased together. Rooms come in the order of their oldest free MQ-pending
// row. The scan and the lease writes are under one write lock, so two
// owners never both see a room as free.
func (s *Store) ClaimOutboxMQ(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	return s.claimOutbox(ctx, limit, func(t *outboxTable) []persistence.OutboxRow {
		rows, _ := t.claimByRoom(t.mq.tree, pivot("", math.MinInt64, ""), limit,
			func(e *outboxEntry) (bool, bool) { return e.mqLockUntilMs() <= nowMs, true },
			func(key persistence.RoomKey, n int) []persistence.OutboxRow {
				return t.claimRoomMQ(key, owner, nowMs, leaseMs, n)
			})
		return rows
	})
}

// claimRoomMQ leases the lowest MQ-pending rows of one room to owner,
// unless any of them is under a live MQ lease (the owner's own too: a
// claimer marks or releases what it took, and rows it could not release
// keep the room until their lease ends). Callers hold mu for writing.
func (t *outboxTable) claimRoomMQ(key persistence.RoomKey, owner string, nowMs, leaseMs int64, limit int) []persistence.OutboxRow {
	rows := t.leaseRoom(t.mqRoom, key, limit,
		func(e *outboxEntry, _ bool) (held, stop bool) { return e.mqLockUntilMs() > nowMs, false },
		func(row *persistence.OutboxRow) { row.MQLockedBy, row.MQLockUntilMs = owner, nowMs+leaseMs })
	for i := range rows {
		rows[i] = withoutGivenBack(rows[i])
	}
	return rows
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
