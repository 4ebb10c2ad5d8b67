package mysql

import (
	"context"
	"strings"

	"github.com/hyapp/roomcell/persistence"
)

// bulkChunk is the most rows one bulk UPDATE statement changes: a bulk
// requeue of a long outage's backlog is many short statements (each its
// own commit, under query_timeout), never one transaction that holds
// thousands of row locks against the relay's marks.
const bulkChunk = 1000

// where builds a bulk operation's WHERE clause: its conditions joined by
// AND, empty filters left out.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds, w.args = append(w.conds, cond), append(w.args, args...)
}

// eq adds col = v unless v is empty.
func (w *where) eq(col, v string) {
	if v != "" {
		w.add(col+" = ?", v)
	}
}

// between adds col in [fromMs, toMs), each bound only when set.
func (w *where) between(col string, fromMs, toMs int64) {
	if fromMs != 0 {
		w.add(col+" >= ?", fromMs)
	}
	if toMs != 0 {
		w.add(col+" < ?", toMs)
	}
}

// errorContains adds a case-insensitive substring match on last_error.
// LOCATE, not LIKE: the operator's text is matched as it is, with no
// wildcard to escape; LOWER on both sides ignores case under the table's
// binary collation.
func (w *where) errorContains(text string) {
	if text != "" {
		w.add("LOCATE(LOWER(?), LOWER(COALESCE(last_error, ''))) > 0", text)
	}
}

func (w *where) sql() (string, []any) { return strings.Join(w.conds, " AND "), w.args }

// outboxWhere is sel's WHERE clause on room_outbox. statusCond says which
// statuses the operation may change; sel.Status narrows them.
func outboxWhere(sel persistence.OutboxSelector, statusCond string, statusArgs ...any) (string, []any) {
	w := &where{}
	w.add("("+statusCond+")", statusArgs...)
	w.eq("status", sel.Status)
	w.eq("app_code", sel.AppCode)
	w.eq("room_id", sel.RoomID)
	w.between("created_at_ms", sel.CreatedFromMs, sel.CreatedToMs)
	w.errorContains(sel.ErrorContains)
	return w.sql()
}

// requeueCond: a parked row, or a pending row not yet due (one already
// due needs no requeue, and leaving it out is what makes the statement
// loop end).
const requeueCond = "status = 'parked' OR (status = 'pending' AND next_retry_at_ms > ?)"

const skipCond = "status IN ('parked', 'pending')"

// bulkUpdate applies set to the rows matching where, oldest first (in
// listOrder: a limit that cuts a command takes its first events, so a
// requeue never sends a command's later events while earlier ones stay
// parked), in statements of bulkChunk rows, until none is left or limit rows
// changed (0 = no limit). It returns how many rows changed.
func (s *Store) bulkUpdate(ctx context.Context, op, where string, whereArgs []any, limit int, set string, setArgs ...any) (int, error) {
	total := 0
	for {
		n := bulkChunk
		if limit > 0 {
			n = min(n, limit-total)
		}
		if n <= 0 {
			return total, nil
		}
		cctx, cancel := s.opCtx(ctx)
		args := append(append(append([]any{}, setArgs...), whereArgs...), n)
		res, err := s.db.ExecContext(cctx, "UPDATE room_outbox SET "+set+" WHERE "+where+" ORDER BY "+listOrder+" LIMIT ?", args...)
		var changed int64
		if err == nil {
			changed, err = res.RowsAffected()
		}
		cancel()
		if err != nil {
			return total, s.wrap(op, err)
		}
		total += int(changed)
		if changed < int64(n) {
			return total, nil
		}
	}
}

// countOutbox counts the rows matching where, at most limit (0 = all).
func (s *Store) countOutbox(ctx context.Context, op, where string, args []any, limit int) (int, error) {
	if err := ready(ctx); err != nil {
		return 0, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	q := "SELECT COUNT(*) FROM room_outbox WHERE " + where
	if limit > 0 {
		q = "SELECT COUNT(*) FROM (SELECT 1 FROM room_outbox WHERE " + where + " LIMIT ?) AS picked"
		args = append(args, limit)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, s.wrap(op, err)
	}
	return n, nil
}

// CountRequeueOutbox implements persistence.OutboxBulkStore.
func (s *Store) CountRequeueOutbox(ctx context.Context, sel persistence.OutboxSelector, nowMs int64) (int, error) {
	where, args := outboxWhere(sel, requeueCond, nowMs)
	return s.countOutbox(ctx, "count outbox requeue", where, args, sel.Limit)
}

// BulkRequeueOutbox implements persistence.OutboxBulkStore. A pending
// row's sender keeps its lease, as in RequeueOutbox; a parked row leaves
// its room's lease (requeueLease).
func (s *Store) BulkRequeueOutbox(ctx context.Context, sel persistence.OutboxSelector, nowMs int64) (int, error) {
	if err := ready(ctx); err != nil {
		return 0, err
	}
	where, args := outboxWhere(sel, requeueCond, nowMs)
	return s.bulkUpdate(ctx, "bulk requeue outbox", where, args, sel.Limit,
		requeueLease+", status = 'pending', next_retry_at_ms = ?, updated_at_ms = ?", nowMs, nowMs)
}

// CountSkipOutbox implements persistence.OutboxBulkStore.
func (s *Store) CountSkipOutbox(ctx context.Context, sel persistence.OutboxSelector) (int, error) {
	where, args := outboxWhere(sel, skipCond)
	return s.countOutbox(ctx, "count outbox skip", where, args, sel.Limit)
}

// BulkSkipOutbox implements persistence.OutboxBulkStore.
func (s *Store) BulkSkipOutbox(ctx context.Context, sel persistence.OutboxSelector, by, reason string, nowMs int64) (int, error) {
	if err := ready(ctx); err != nil {
		return 0, err
	}
	if err := checkLen("skipped by", by, maxLockedBy, false); err != nil {
		return 0, err
	}
	where, args := outboxWhere(sel, skipCond)
	return s.bulkUpdate(ctx, "bulk skip outbox", where, args, sel.Limit,
		"status = 'skipped', resolved_by = ?, resolved_at_ms = ?, resolution = ?, updated_at_ms = ?, locked_by = NULL, lock_until_ms = 0",
		by, nowMs, truncateChars(reason, maxLastError), nowMs)
}

// noticeWhere is sel's WHERE clause on notice_delivery_events: failed
// rows only.
func noticeWhere(sel persistence.NoticeSelector) (string, []any) {
	w := &where{}
	w.add("status = ?", persistence.NoticeFailed)
	w.eq("source_name", sel.SourceName)
	w.eq("app_code", sel.AppCode)
	w.eq("user_id", sel.UserID)
	w.eq("event_type", sel.EventType)
	w.between("source_created_at_ms", sel.CreatedFromMs, sel.CreatedToMs)
	w.errorContains(sel.ErrorContains)
	return w.sql()
}

// CountRequeue implements persistence.NoticeBulkStore.
func (s *NoticeStore) CountRequeue(ctx context.Context, sel persistence.NoticeSelector) (int, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	where, args := noticeWhere(sel)
	q := "SELECT COUNT(*) FROM notice_delivery_events WHERE " + where
	if sel.Limit > 0 {
		q = "SELECT COUNT(*) FROM (SELECT 1 FROM notice_delivery_events WHERE " + where + " LIMIT ?) AS picked"
		args = append(args, sel.Limit)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, s.wrap("count notice requeue", err)
	}
	return n, nil
}

// BulkRequeue implements persistence.NoticeBulkStore: statements of
// bulkChunk rows, oldest source event first; a requeued row is no longer
// failed, so each statement takes the next ones.
func (s *NoticeStore) BulkRequeue(ctx context.Context, sel persistence.NoticeSelector, nowMs int64) (int, error) {
	return s.bulkNotices(ctx, "bulk requeue notices", sel,
		"status = ?, retry_count = 0, next_retry_at_ms = ?, updated_at_ms = ?, requeue_count = requeue_count + 1, requeued_at_ms = ?",
		persistence.NoticeRetryable, nowMs, nowMs, nowMs)
}

// BulkSkip implements persistence.NoticeBulkStore, in statements like
// BulkRequeue. last_error is SkipText's, built in SQL from the row's own.
func (s *NoticeStore) BulkSkip(ctx context.Context, sel persistence.NoticeSelector, by, reason string, nowMs int64) (int, error) {
	return s.bulkNotices(ctx, "bulk skip notices", sel,
		"status = ?, next_retry_at_ms = ?, updated_at_ms = ?, last_error = LEFT(CONCAT('skipped by ', ?, ': ', ?, ' (was: ', COALESCE(last_error, ''), ')'), 1024)",
		persistence.NoticeSkipped, nowMs, nowMs, by, reason)
}

// bulkNotices applies set to the failed rows sel admits, oldest source
// event first, bulkChunk rows a statement, until none is left or
// sel.Limit rows changed.
func (s *NoticeStore) bulkNotices(ctx context.Context, op string, sel persistence.NoticeSelector, set string, setArgs ...any) (int, error) {
	where, whereArgs := noticeWhere(sel)
	total := 0
	for {
		n := bulkChunk
		if sel.Limit > 0 {
			n = min(n, sel.Limit-total)
		}
		if n <= 0 {
			return total, nil
		}
		cctx, cancel, err := s.begin(ctx)
		if err != nil {
			return total, err
		}
		var changed int64
		err = retryDeadlock(cctx, func() error {
			args := append(append(append([]any{}, setArgs...), whereArgs...), n)
			res, err := s.db.ExecContext(cctx, "UPDATE notice_delivery_events SET "+set+" WHERE "+where+
				" ORDER BY source_created_at_ms, source_name, app_code, source_event_id, channel LIMIT ?", args...)
			if err == nil {
				changed, err = res.RowsAffected()
			}
			return err
		})
		cancel()
		if err != nil {
			return total, s.wrap(op, err)
		}
		total += int(changed)
		if changed < int64(n) {
			return total, nil
		}
	}
}
