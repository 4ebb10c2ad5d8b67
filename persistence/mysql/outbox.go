package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hyapp/roomcell/persistence"
)

const outboxColumns = "event_id, envelope, status, retry_count, last_error, created_at_ms, updated_at_ms, published_at_ms, locked_by, lock_until_ms, event_type, app_code, room_id, room_seq"

func scanOutbox(sc interface{ Scan(...any) error }) (persistence.OutboxRow, error) {
	var (
		r         persistence.OutboxRow
		eventID   string
		envelope  []byte
		lastError sql.NullString
		published sql.NullInt64
		lockedBy  sql.NullString
		col       persistence.Envelope
	)
	if err := sc.Scan(&eventID, &envelope, &r.Status, &r.RetryCount, &lastError, &r.CreatedAtMs, &r.UpdatedAtMs, &published, &lockedBy, &r.LockUntilMs,
		&col.EventType, &col.AppCode, &col.RoomID, &col.RoomSeq); err != nil {
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

// ClaimPendingOutbox implements persistence.OutboxStore. One transaction
// locks the oldest free rows with FOR UPDATE SKIP LOCKED (MySQL 8, MariaDB
// 10.6+): a relay on another instance claiming at the same moment skips
// the rows this one holds instead of waiting for them, and the lock_until
// check makes the lease hold after COMMIT.
func (s *Store) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
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
		return nil, s.wrap("claim outbox", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := s.queryOutbox(ctx, tx, "claim outbox",
		"SELECT "+outboxColumns+" FROM room_outbox WHERE status = 'pending' AND lock_until_ms <= ?"+
			" ORDER BY created_at_ms, event_id LIMIT ? FOR UPDATE SKIP LOCKED", nowMs, limit)
	if err != nil || len(rows) == 0 {
		return rows, err
	}
	until := nowMs + leaseMs
	var q strings.Builder
	q.WriteString("UPDATE room_outbox SET locked_by = ?, lock_until_ms = ? WHERE event_id IN (")
	args := []any{owner, until}
	for i := range rows {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('?')
		args = append(args, rows[i].Envelope.EventID)
		rows[i].LockedBy = owner
		rows[i].LockUntilMs = until
	}
	q.WriteByte(')')
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return nil, s.wrap("claim outbox", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, s.wrap("claim outbox: commit", err)
	}
	return rows, nil
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
	if err := ready(ctx); err != nil {
		return err
	}
	const chunk = 500
	for len(eventIDs) > 0 {
		n := min(chunk, len(eventIDs))
		ids := eventIDs[:n]
		eventIDs = eventIDs[n:]
		args := make([]any, 0, n+2)
		args = append(args, nowMs, nowMs)
		for _, id := range ids {
			args = append(args, id)
		}
		q := "UPDATE room_outbox SET status = 'published', last_error = NULL, published_at_ms = ?, updated_at_ms = ?, locked_by = NULL, lock_until_ms = 0" +
			" WHERE status = 'pending' AND event_id IN (?" + strings.Repeat(",?", n-1) + ")"
		cctx, cancel := s.opCtx(ctx)
		_, err := s.db.ExecContext(cctx, q, args...)
		cancel()
		if err != nil {
			return s.wrap("mark published batch", err)
		}
	}
	return nil
}

// MarkOutboxFailed implements persistence.OutboxStore. lastError is cut to
// the column's 1024 characters.
func (s *Store) MarkOutboxFailed(ctx context.Context, eventID, lastError string, nowMs int64) error {
	return s.updateOutbox(ctx, "mark failed", eventID,
		"retry_count = retry_count + 1, last_error = ?, updated_at_ms = ?, locked_by = NULL, lock_until_ms = 0",
		truncateChars(lastError, maxLastError), nowMs)
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
	if err != nil {
		return persistence.OutboxStats{}, s.wrap("outbox stats", err)
	}
	return st, nil
}
