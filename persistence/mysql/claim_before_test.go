package mysql

import (
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/hyapp/roomcell/persistence"
)

// claimBefore is the outbox claim as it was before it took a fixed number
// of statements (kept only so BenchmarkOutboxClaimDrain measures both in
// one run): candidates by (next_retry_at_ms, event_id), then one locking
// read per room with the room's held count as a subquery.
func (s *Store) claimBefore(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	rs, err := s.db.QueryContext(ctx, "SELECT app_code, room_id FROM room_outbox"+
		" WHERE status = 'pending' AND next_retry_at_ms <= ? AND lock_until_ms <= ?"+
		" ORDER BY next_retry_at_ms, event_id LIMIT ?", nowMs, nowMs, limit*4)
	if err != nil {
		return nil, err
	}
	var rooms []persistence.RoomKey
	for rs.Next() {
		var k persistence.RoomKey
		if err := rs.Scan(&k.AppCode, &k.RoomID); err != nil {
			rs.Close()
			return nil, err
		}
		if !slices.Contains(rooms, k) {
			rooms = append(rooms, k)
		}
	}
	rs.Close()
	if len(rooms) == 0 {
		return nil, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	var out []persistence.OutboxRow
	for _, k := range rooms {
		if len(out) >= limit {
			break
		}
		rows, err := lockRoomBefore(ctx, tx, k, owner, nowMs, limit-len(out))
		if isDeadlock(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	if len(out) == 0 {
		return nil, nil
	}
	if err := leaseRowsBefore(ctx, tx, out, owner, nowMs+leaseMs); err != nil {
		return nil, err
	}
	return out, tx.Commit()
}

func lockRoomBefore(ctx context.Context, tx *sql.Tx, k persistence.RoomKey, owner string, nowMs int64, limit int) ([]persistence.OutboxRow, error) {
	rs, err := tx.QueryContext(ctx, "SELECT "+outboxColumns+", (SELECT COUNT(*) FROM room_outbox h WHERE h.app_code = ? AND h.room_id = ?"+
		" AND h.status = 'pending' AND h.lock_until_ms > ? AND h.locked_by <> ?) FROM room_outbox"+
		" WHERE app_code = ? AND room_id = ? AND status = 'pending' ORDER BY room_seq, event_id LIMIT ? FOR UPDATE",
		k.AppCode, k.RoomID, nowMs, owner, k.AppCode, k.RoomID, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var rows []persistence.OutboxRow
	held := 0
	for rs.Next() {
		r, err := scanOutbox(scanPlusBefore{rs, &held})
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 || held > 0 || rows[0].NextRetryAtMs > nowMs {
		return nil, nil
	}
	for _, r := range rows {
		if r.LockUntilMs > nowMs && r.LockedBy != owner {
			return nil, nil
		}
	}
	return rows, nil
}

type scanPlusBefore struct {
	rows  *sql.Rows
	extra any
}

func (p scanPlusBefore) Scan(dest ...any) error { return p.rows.Scan(append(dest, p.extra)...) }

// leaseRowsBefore is the claim's lease as it was before rooms were leased
// (room_outbox_leases): the lease written into every claimed row.
func leaseRowsBefore(ctx context.Context, tx *sql.Tx, rows []persistence.OutboxRow, owner string, until int64) error {
	args := []any{owner, until}
	for i := range rows {
		args = append(args, rows[i].Envelope.EventID)
		rows[i].LockedBy = owner
		rows[i].LockUntilMs = until
	}
	_, err := tx.ExecContext(ctx, "UPDATE room_outbox SET locked_by = ?, lock_until_ms = ? WHERE event_id IN (?"+strings.Repeat(",?", len(rows)-1)+")", args...)
	return err
}
