package mysql

import (
	"context"
	"slices"
	"strings"

	"github.com/hyapp/roomcell/persistence"
)

// The MQ fanout's side of room_outbox (persistence.OutboxMQStore): its own
// columns (mq_status, mq_published_at_ms, mq_locked_by, mq_lock_until_ms)
// and index (idx_room_outbox_mq). Nothing here reads or writes status,
// locked_by or lock_until_ms, the IM relay's.

// ClaimOutboxMQ implements persistence.OutboxMQStore: one transaction that
// walks idx_room_outbox_mq from the oldest pending row, skipping rows
// locked by a concurrent claim (SKIP LOCKED: order across claimers does
// not matter to the fanout) and rows under another live MQ lease, and
// leases what it found.
func (s *Store) ClaimOutboxMQ(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	if err := ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	if err := checkLen("owner", owner, maxLockedBy, true); err != nil {
		return nil, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.wrap("claim outbox mq", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := s.queryOutbox(ctx, tx, "claim outbox mq", "SELECT "+outboxColumns+" FROM room_outbox"+
		" WHERE mq_status = 'pending' AND mq_lock_until_ms <= ?"+
		" ORDER BY created_at_ms, event_id LIMIT ? FOR UPDATE SKIP LOCKED", nowMs, limit)
	if err != nil || len(rows) == 0 {
		if isDeadlock(err) {
			return nil, nil
		}
		return nil, err
	}
	until := nowMs + leaseMs
	ids := make([]any, 0, len(rows)+2)
	ids = append(ids, owner, until)
	for i := range rows {
		rows[i].MQLockedBy, rows[i].MQLockUntilMs = owner, until
		ids = append(ids, rows[i].Envelope.EventID)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE room_outbox SET mq_locked_by = ?, mq_lock_until_ms = ?"+
		" WHERE event_id IN ("+placeholders(len(rows))+")", ids...); err != nil {
		return nil, s.wrap("claim outbox mq", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, s.wrap("claim outbox mq: commit", err)
	}
	persistence.GroupByRoom(rows)
	return rows, nil
}

// MarkOutboxMQPublished implements persistence.OutboxMQStore.
func (s *Store) MarkOutboxMQPublished(ctx context.Context, eventIDs []string, nowMs int64) error {
	return s.mqUpdateIDs(ctx, "mark outbox mq published", eventIDs,
		"mq_status = 'published', mq_published_at_ms = ?, mq_locked_by = NULL, mq_lock_until_ms = 0", nowMs)
}

// ReleaseOutboxMQ implements persistence.OutboxMQStore.
func (s *Store) ReleaseOutboxMQ(ctx context.Context, eventIDs []string) error {
	return s.mqUpdateIDs(ctx, "release outbox mq", eventIDs, "mq_locked_by = NULL, mq_lock_until_ms = 0")
}

// mqUpdateIDs applies set to the MQ-pending rows of eventIDs, one UPDATE
// per chunk.
func (s *Store) mqUpdateIDs(ctx context.Context, op string, eventIDs []string, set string, args ...any) error {
	if err := ready(ctx); err != nil {
		return err
	}
	const chunk = 500
	for ids := range slices.Chunk(eventIDs, chunk) {
		a := slices.Clone(args)
		for _, id := range ids {
			a = append(a, id)
		}
		cctx, cancel := s.opCtx(ctx)
		_, err := s.db.ExecContext(cctx, "UPDATE room_outbox SET "+set+
			" WHERE mq_status = 'pending' AND event_id IN (?"+strings.Repeat(",?", len(ids)-1)+")", a...)
		cancel()
		if err != nil {
			return s.wrap(op, err)
		}
	}
	return nil
}

// ParkOutboxMQ implements persistence.OutboxMQStore.
func (s *Store) ParkOutboxMQ(ctx context.Context, eventID string) error {
	if _, err := s.GetOutbox(ctx, eventID); err != nil {
		return err
	}
	return s.mqUpdateIDs(ctx, "park outbox mq", []string{eventID}, "mq_status = 'parked', mq_locked_by = NULL, mq_lock_until_ms = 0")
}
