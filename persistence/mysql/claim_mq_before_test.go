package mysql

import (
	"context"

	"github.com/hyapp/roomcell/persistence"
)

// claimMQBefore is the MQ claim as it was before it took whole rooms (kept
// only so BenchmarkOutboxMQClaimDrain measures both in one run): the
// oldest MQ-pending rows under no live MQ lease, by time, SKIP LOCKED. It
// let two owners hold rows of one room at once.
func (s *Store) claimMQBefore(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := s.queryOutbox(ctx, tx, "claim outbox mq", "SELECT "+outboxColumns+" FROM room_outbox"+
		" WHERE mq_status = 'pending' AND mq_lock_until_ms <= ?"+
		" ORDER BY created_at_ms, event_id LIMIT ? FOR UPDATE SKIP LOCKED", nowMs, limit)
	if err != nil || len(rows) == 0 {
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
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	persistence.GroupByRoom(rows)
	return rows, nil
}
