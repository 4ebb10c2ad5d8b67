package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hyapp/roomcell/persistence"
)

const outboxColumns = "event_id, envelope, status, retry_count, last_error, created_at_ms, updated_at_ms, published_at_ms, locked_by, lock_until_ms, event_type, app_code, room_id, room_seq, next_retry_at_ms, resolved_by, resolved_at_ms, resolution, mq_status, mq_published_at_ms, mq_locked_by, mq_lock_until_ms"

func scanOutbox(sc interface{ Scan(...any) error }) (persistence.OutboxRow, error) {
	var (
		r         persistence.OutboxRow
		eventID   string
		envelope  []byte
		lastError sql.NullString
		published sql.NullInt64
		lockedBy  sql.NullString
		col       persistence.Envelope
		resBy     sql.NullString
		resAt     sql.NullInt64
		res       sql.NullString
		mqPubAt   sql.NullInt64
		mqLocked  sql.NullString
	)
	if err := sc.Scan(&eventID, &envelope, &r.Status, &r.RetryCount, &lastError, &r.CreatedAtMs, &r.UpdatedAtMs, &published, &lockedBy, &r.LockUntilMs,
		&col.EventType, &col.AppCode, &col.RoomID, &col.RoomSeq, &r.NextRetryAtMs, &resBy, &resAt, &res,
		&r.MQStatus, &mqPubAt, &mqLocked, &r.MQLockUntilMs); err != nil {
		return r, err
	}
	env, err := decodeEnvelope(envelope)
	if err != nil {
		// One corrupt envelope must not fail every scan that meets it:
		// hand the row back with what its own columns say and no payload,
		// so the relay sees a corrupt envelope, marks it and goes on.
		col.EventID = eventID
		col.CreatedAtMs = r.CreatedAtMs
		env = col
	}
	r.Envelope = env
	r.LastError = lastError.String
	r.PublishedAtMs = published.Int64
	r.LockedBy = lockedBy.String
	r.ResolvedBy, r.ResolvedAtMs, r.Resolution = resBy.String, resAt.Int64, res.String
	r.MQPublishedAtMs, r.MQLockedBy = mqPubAt.Int64, mqLocked.String
	return r, nil
}

// queryOutbox runs a room_outbox SELECT on q (the pool or a transaction).
func (s *Store) queryOutbox(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, op, query string, args ...any) ([]persistence.OutboxRow, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer rows.Close()
	var out []persistence.OutboxRow
	for rows.Next() {
		r, err := scanOutbox(rows)
		if err != nil {
			return nil, s.wrap(op, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}

// ListPendingOutbox implements persistence.OutboxStore. limit <= 0 returns
// nothing: a scan is always bounded. It walks idx_room_outbox_pending in
// (created_at_ms, event_id) order and stops after limit rows.
func (s *Store) ListPendingOutbox(ctx context.Context, limit int) ([]persistence.OutboxRow, error) {
	if err := ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	return s.queryOutbox(ctx, s.db, "list pending outbox",
		"SELECT "+outboxColumns+" FROM room_outbox WHERE status = 'pending' ORDER BY created_at_ms, event_id LIMIT ?", limit)
}

// claimScanFactor: the claim's first step reads up to limit×this due rows
// to find rooms, so a few hot rooms with many due rows do not hide others.
const claimScanFactor = 4

// ClaimPendingOutbox implements persistence.OutboxStore. A plain read of
// idx_room_outbox_due finds candidate rooms; claimRooms then leases the
// free and due ones.
func (s *Store) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	return s.claimRooms(ctx, owner, nowMs, leaseMs, limit, func(ctx context.Context) ([]persistence.RoomKey, error) {
		rs, err := s.db.QueryContext(ctx, "SELECT app_code, room_id FROM room_outbox"+
			" WHERE status = 'pending' AND next_retry_at_ms <= ? AND lock_until_ms <= ?"+
			" ORDER BY next_retry_at_ms, event_id LIMIT ?", nowMs, nowMs, limit*claimScanFactor)
		if err != nil {
			return nil, s.wrap("claim outbox", err)
		}
		defer rs.Close()
		var rooms []persistence.RoomKey
		for rs.Next() {
			var k persistence.RoomKey
			if err := rs.Scan(&k.AppCode, &k.RoomID); err != nil {
				return nil, s.wrap("claim outbox", err)
			}
			if !slices.Contains(rooms, k) {
				rooms = append(rooms, k)
			}
		}
		if err := rs.Err(); err != nil {
			return nil, s.wrap("claim outbox", err)
		}
		return rooms, nil
	})
}

// ClaimRoomOutbox implements persistence.OutboxStore.
func (s *Store) ClaimRoomOutbox(ctx context.Context, key persistence.RoomKey, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	return s.claimRooms(ctx, owner, nowMs, leaseMs, limit, func(context.Context) ([]persistence.RoomKey, error) {
		return []persistence.RoomKey{key}, nil
	})
}

// claimRooms locks candidate rooms one by one in candidate (due) order,
// each room's lowest pending rows in one statement (FOR UPDATE, not SKIP
// LOCKED: skipping a locked row could hand out a later row of a room
// before an earlier one), keeps the rooms that are free and due, and stops
// at limit rows. Claimers walk the same due order, so they rarely meet in
// opposite orders; when InnoDB still picks this claim as a deadlock victim
// it claims nothing this time (the next poll tries again).
func (s *Store) claimRooms(ctx context.Context, owner string, nowMs, leaseMs int64, limit int,
	candidates func(context.Context) ([]persistence.RoomKey, error)) ([]persistence.OutboxRow, error) {
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
	rooms, err := candidates(ctx)
	if err != nil || len(rooms) == 0 {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.wrap("claim outbox", err)
	}
	defer func() { _ = tx.Rollback() }()
	var out []persistence.OutboxRow
	for _, k := range rooms {
		if len(out) >= limit {
			break
		}
		rows, err := s.lockRoom(ctx, tx, k, owner, nowMs, limit-len(out))
		if isDeadlock(err) {
			return nil, nil
		}
		if err != nil {
			return nil, s.wrap("claim outbox "+k.String(), err)
		}
		out = append(out, rows...)
	}
	if len(out) == 0 {
		return nil, nil
	}
	if err := s.lease(ctx, tx, out, owner, nowMs+leaseMs); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, s.wrap("claim outbox: commit", err)
	}
	return out, nil
}

// lockRoom locks the lowest pending rows of one room and returns them, or
// nothing when another owner holds a pending row of the room or its lowest
// row is not due. The held check looks at every pending row of the room,
// not only the first limit: the room's publisher leases its newest rows at
// insert.
func (s *Store) lockRoom(ctx context.Context, tx *sql.Tx, k persistence.RoomKey, owner string, nowMs int64, limit int) ([]persistence.OutboxRow, error) {
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
		r, err := scanOutbox(scanPlus{rs, &held})
		if err != nil {
			return nil, s.wrap("claim outbox "+k.String(), err)
		}
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 || held > 0 || rows[0].NextRetryAtMs > nowMs {
		return nil, nil
	}
	// The subquery is a plain read whose snapshot may predate the lock
	// wait: a claim that committed while this one waited is seen only in
	// the locked rows themselves, which a locking read returns as they
	// are now.
	for _, r := range rows {
		if r.LockUntilMs > nowMs && r.LockedBy != owner {
			return nil, nil
		}
	}
	return rows, nil
}

// scanPlus scans an outbox row followed by one more column.
type scanPlus struct {
	rows  *sql.Rows
	extra any
}

func (p scanPlus) Scan(dest ...any) error { return p.rows.Scan(append(dest, p.extra)...) }

// lease writes owner's lease into rows (in the store and in the slice).
func (s *Store) lease(ctx context.Context, tx *sql.Tx, rows []persistence.OutboxRow, owner string, until int64) error {
	if len(rows) == 0 {
		return nil
	}
	args := []any{owner, until}
	for i := range rows {
		args = append(args, rows[i].Envelope.EventID)
		rows[i].LockedBy = owner
		rows[i].LockUntilMs = until
	}
	q := "UPDATE room_outbox SET locked_by = ?, lock_until_ms = ? WHERE event_id IN (?" + strings.Repeat(",?", len(rows)-1) + ")"
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return s.wrap("claim outbox", err)
	}
	return nil
}

// updateOutbox runs a single-row UPDATE guarded by status = 'pending'. No
// row changed means the event is unknown (ErrNotFound) or already
// published (a no-op).
func (s *Store) updateOutbox(ctx context.Context, op, eventID, set string, args ...any) error {
	if err := ready(ctx); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	res, err := s.db.ExecContext(ctx, "UPDATE room_outbox SET "+set+" WHERE event_id = ? AND status = 'pending'", append(args, eventID)...)
	if err != nil {
		return s.wrap(op+" "+eventID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		return nil
	}
	var one int
	err = s.db.QueryRowContext(ctx, "SELECT 1 FROM room_outbox WHERE event_id = ?", eventID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("mysql: %s: outbox event %q: %w", op, eventID, persistence.ErrNotFound)
	}
	if err != nil {
		return s.wrap(op+" "+eventID, err)
	}
	return nil
}

// MarkOutboxPublished implements persistence.OutboxStore.
func (s *Store) MarkOutboxPublished(ctx context.Context, eventID string, nowMs int64) error {
	return s.updateOutbox(ctx, "mark published", eventID,
		"status = 'published', last_error = NULL, published_at_ms = ?, updated_at_ms = ?, locked_by = NULL, lock_until_ms = 0",
		nowMs, nowMs)
}

// MarkOutboxPublishedBatch implements persistence.OutboxStore: one UPDATE
// (one commit) per chunk of ids instead of one per row.
func (s *Store) MarkOutboxPublishedBatch(ctx context.Context, eventIDs []string, nowMs int64) error {
	return s.updatePending(ctx, "mark published batch", eventIDs,
		"status = 'published', last_error = NULL, published_at_ms = ?, updated_at_ms = ?, locked_by = NULL, lock_until_ms = 0",
		nowMs, nowMs)
}

// ReleaseOutboxBatch implements persistence.OutboxStore, one UPDATE per
// chunk like MarkOutboxPublishedBatch.
func (s *Store) ReleaseOutboxBatch(ctx context.Context, eventIDs []string) error {
	return s.updatePending(ctx, "release batch", eventIDs, "locked_by = NULL, lock_until_ms = 0")
}

// updatePending applies set (with setArgs) to the pending rows among
// eventIDs, 500 ids a statement; rows not pending and unknown ids are
// skipped.
func (s *Store) updatePending(ctx context.Context, op string, eventIDs []string, set string, setArgs ...any) error {
	if err := ready(ctx); err != nil {
		return err
	}
	const chunk = 500
	for len(eventIDs) > 0 {
		n := min(chunk, len(eventIDs))
		ids := eventIDs[:n]
		eventIDs = eventIDs[n:]
		args := make([]any, 0, n+len(setArgs))
		args = append(args, setArgs...)
		for _, id := range ids {
			args = append(args, id)
		}
		q := "UPDATE room_outbox SET " + set + " WHERE status = 'pending' AND event_id IN (?" + strings.Repeat(",?", n-1) + ")"
		cctx, cancel := s.opCtx(ctx)
		_, err := s.db.ExecContext(cctx, q, args...)
		cancel()
		if err != nil {
			return s.wrap(op, err)
		}
	}
	return nil
}

// MarkOutboxFailed implements persistence.OutboxStore. lastError is cut to
// the column's 1024 characters.
func (s *Store) MarkOutboxFailed(ctx context.Context, eventID, lastError string, nowMs, nextRetryAtMs int64) error {
	return s.updateOutbox(ctx, "mark failed", eventID,
		"retry_count = retry_count + 1, last_error = ?, updated_at_ms = ?, next_retry_at_ms = ?, locked_by = NULL, lock_until_ms = 0",
		truncateChars(lastError, maxLastError), nowMs, nextRetryAtMs)
}

// ParkOutbox implements persistence.OutboxStore.
func (s *Store) ParkOutbox(ctx context.Context, eventID, lastError string, nowMs int64) error {
	return s.updateOutbox(ctx, "park", eventID,
		"status = 'parked', retry_count = retry_count + 1, last_error = ?, updated_at_ms = ?, locked_by = NULL, lock_until_ms = 0",
		truncateChars(lastError, maxLastError), nowMs)
}

// RequeueOutbox implements persistence.OutboxStore.
func (s *Store) RequeueOutbox(ctx context.Context, eventID string, nowMs int64) error {
	return s.resolveOutbox(ctx, "requeue", eventID, []string{persistence.OutboxParked, persistence.OutboxPending},
		"status = 'pending', next_retry_at_ms = ?, updated_at_ms = ?", nowMs, nowMs)
}

// SkipOutbox implements persistence.OutboxStore.
func (s *Store) SkipOutbox(ctx context.Context, eventID, by, reason string, nowMs int64) error {
	if err := checkLen("skipped by", by, maxLockedBy, false); err != nil {
		return err
	}
	return s.resolveOutbox(ctx, "skip", eventID, []string{persistence.OutboxParked, persistence.OutboxPending, persistence.OutboxSkipped},
		"status = 'skipped', resolved_by = ?, resolved_at_ms = ?, resolution = ?, updated_at_ms = ?, locked_by = NULL, lock_until_ms = 0",
		by, nowMs, truncateChars(reason, maxLastError), nowMs)
}

// resolveOutbox is an operator's change of one row whose status is one of
// from; any other status is ErrConflict. A skipped row stays as it was
// recorded (skipping it again changes nothing).
func (s *Store) resolveOutbox(ctx context.Context, op, eventID string, from []string, set string, args ...any) error {
	if err := ready(ctx); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var status string
	err := s.db.QueryRowContext(ctx, "SELECT status FROM room_outbox WHERE event_id = ?", eventID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("mysql: %s: outbox event %q: %w", op, eventID, persistence.ErrNotFound)
	}
	if err != nil {
		return s.wrap(op+" "+eventID, err)
	}
	if !slices.Contains(from, status) {
		return fmt.Errorf("mysql: %s %s: row is %s: %w", op, eventID, status, persistence.ErrConflict)
	}
	if status == persistence.OutboxSkipped {
		return nil
	}
	// The status guard makes a race with a relay's mark harmless: the
	// UPDATE then changes nothing.
	res, err := s.db.ExecContext(ctx, "UPDATE room_outbox SET "+set+" WHERE event_id = ? AND status = ?", append(args, eventID, status)...)
	if err != nil {
		return s.wrap(op+" "+eventID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("mysql: %s %s: row changed meanwhile: %w", op, eventID, persistence.ErrConflict)
	}
	return nil
}

// ReleaseOutbox implements persistence.OutboxStore.
func (s *Store) ReleaseOutbox(ctx context.Context, eventID string) error {
	return s.updateOutbox(ctx, "release", eventID, "locked_by = NULL, lock_until_ms = 0")
}

func truncateChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// GetOutbox implements persistence.OutboxStore.
func (s *Store) GetOutbox(ctx context.Context, eventID string) (persistence.OutboxRow, error) {
	if err := ready(ctx); err != nil {
		return persistence.OutboxRow{}, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	r, err := scanOutbox(s.db.QueryRowContext(ctx, "SELECT "+outboxColumns+" FROM room_outbox WHERE event_id = ?", eventID))
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.OutboxRow{}, fmt.Errorf("mysql: outbox event %q: %w", eventID, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.OutboxRow{}, s.wrap("get outbox "+eventID, err)
	}
	return r, nil
}

// ListOutbox implements persistence.OutboxStore. Limit <= 0 means no
// limit. With a status it walks idx_room_outbox_pending; without one it
// sorts the whole table: an operator query, not a hot path.
func (s *Store) ListOutbox(ctx context.Context, f persistence.OutboxFilter) ([]persistence.OutboxRow, error) {
	if err := ready(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	q := "SELECT " + outboxColumns + " FROM room_outbox"
	var args []any
	if f.Status != "" {
		q += " WHERE status = ?"
		args = append(args, f.Status)
	}
	q += " ORDER BY created_at_ms, event_id"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	return s.queryOutbox(ctx, s.db, "list outbox", q, args...)
}

// OutboxStats implements persistence.OutboxStore. Both aggregates read
// only idx_room_outbox_pending: MIN is one index dive, COUNT walks the
// pending entries (the backlog, not the table).
func (s *Store) OutboxStats(ctx context.Context) (persistence.OutboxStats, error) {
	if err := ready(ctx); err != nil {
		return persistence.OutboxStats{}, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var st persistence.OutboxStats
	err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*), COALESCE(MIN(created_at_ms), 0) FROM room_outbox WHERE status = 'pending'").
		Scan(&st.Pending, &st.OldestCreatedAtMs)
	if err == nil {
		err = s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM room_outbox WHERE status = 'parked'").Scan(&st.Parked)
	}
	if err == nil {
		err = s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM room_outbox WHERE mq_status = 'pending'").Scan(&st.MQPending)
	}
	if err != nil {
		return persistence.OutboxStats{}, s.wrap("outbox stats", err)
	}
	return st, nil
}
