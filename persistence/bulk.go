package persistence

import (
	"context"
	"strings"
)

// OutboxSelector picks room_outbox rows for an operator's bulk requeue or
// skip. Empty fields match anything; the fields combine with AND. Only
// rows an operator may still change are ever selected: parked rows, and
// pending rows a bulk requeue would change (not yet due) or a skip would
// resolve.
type OutboxSelector struct {
	// Status is OutboxParked, OutboxPending or "" (both).
	Status string
	// AppCode and RoomID narrow to an app or one room (RoomID needs
	// AppCode: room ids are unique only within an app).
	AppCode string
	RoomID  string
	// CreatedFromMs and CreatedToMs bound created_at_ms to [from, to);
	// 0 leaves that side open.
	CreatedFromMs int64
	CreatedToMs   int64
	// ErrorContains matches rows whose last_error contains it, ASCII case
	// ignored (the error class an outage left: "timeout", "quota",
	// "ErrorCode 70398", ...).
	ErrorContains string
	// Limit is the most rows one call changes (or counts); 0 = all.
	Limit int
}

// matchesCommon is the filter part every backend applies alike.
func (s OutboxSelector) matchesCommon(r OutboxRow) bool {
	e := r.Envelope
	switch {
	case s.AppCode != "" && e.AppCode != s.AppCode,
		s.RoomID != "" && e.RoomID != s.RoomID,
		s.CreatedFromMs != 0 && r.CreatedAtMs < s.CreatedFromMs,
		s.CreatedToMs != 0 && r.CreatedAtMs >= s.CreatedToMs,
		s.ErrorContains != "" && !ContainsFold(r.LastError, s.ErrorContains):
		return false
	}
	return true
}

// MatchesRequeue reports whether a bulk requeue at nowMs changes r: a
// parked row, or a pending one not yet due (a pending row already due is
// left alone, so repeating the requeue finds nothing new).
func (s OutboxSelector) MatchesRequeue(r OutboxRow, nowMs int64) bool {
	switch {
	case s.Status != "" && r.Status != s.Status,
		r.Status == OutboxPending && r.NextRetryAtMs <= nowMs,
		r.Status != OutboxPending && r.Status != OutboxParked:
		return false
	}
	return s.matchesCommon(r)
}

// MatchesSkip reports whether a bulk skip changes r: a parked or pending
// row.
func (s OutboxSelector) MatchesSkip(r OutboxRow) bool {
	switch {
	case s.Status != "" && r.Status != s.Status,
		r.Status != OutboxPending && r.Status != OutboxParked:
		return false
	}
	return s.matchesCommon(r)
}

// ContainsFold reports whether s contains sub, ASCII case ignored (as
// MariaDB's default collation compares last_error in a LIKE).
func ContainsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// OutboxBulkStore is the operators' bulk handling of room_outbox after an
// outage: the rows a selector picks are requeued (pending, due at nowMs;
// a pending row's live lease is kept, as RequeueOutbox does) or skipped
// (done without a send, recorded with by, nowMs and reason). Each call
// works oldest first (created_at_ms, event_id) and returns how many rows
// it changed; the Count methods return how many a call at nowMs would
// change (the dry run), within sel.Limit.
type OutboxBulkStore interface {
	CountRequeueOutbox(ctx context.Context, sel OutboxSelector, nowMs int64) (int, error)
	BulkRequeueOutbox(ctx context.Context, sel OutboxSelector, nowMs int64) (int, error)
	CountSkipOutbox(ctx context.Context, sel OutboxSelector) (int, error)
	BulkSkipOutbox(ctx context.Context, sel OutboxSelector, by, reason string, nowMs int64) (int, error)
}

// NoticeSelector picks dead letters (failed notice rows) for a bulk
// requeue. Empty fields match anything. Notice rows carry no room: narrow
// by source, app, recipient, event type, time and error instead.
type NoticeSelector struct {
	SourceName string
	AppCode    string
	UserID     string
	EventType  string
	// CreatedFromMs and CreatedToMs bound the source event's
	// created_at_ms (source_created_at_ms) to [from, to); 0 = open.
	CreatedFromMs int64
	CreatedToMs   int64
	// ErrorContains matches last_error, ASCII case ignored.
	ErrorContains string
	// Limit is the most rows one call changes (or counts); 0 = all.
	Limit int
}

// Matches reports whether a bulk requeue changes d: a failed row that the
// filters admit.
func (s NoticeSelector) Matches(d NoticeDelivery) bool {
	switch {
	case d.Status != NoticeFailed,
		s.SourceName != "" && d.SourceName != s.SourceName,
		s.AppCode != "" && d.AppCode != s.AppCode,
		s.UserID != "" && d.UserID != s.UserID,
		s.EventType != "" && d.EventType != s.EventType,
		s.CreatedFromMs != 0 && d.SourceCreatedAtMs < s.CreatedFromMs,
		s.CreatedToMs != 0 && d.SourceCreatedAtMs >= s.CreatedToMs,
		s.ErrorContains != "" && !ContainsFold(d.LastError, s.ErrorContains):
		return false
	}
	return true
}

// NoticeBulkStore handles many dead letters at once. BulkRequeue changes
// each row the selector picks as Requeue changes one (retryable, due at
// nowMs, retry_count 0, requeue_count+1); BulkSkip gives them up: status
// skipped (never sent, no longer a dead letter), next_retry_at_ms and
// updated_at_ms nowMs, last_error SkipText(by, reason, last_error).
// CountRequeue is the dry run of both.
type NoticeBulkStore interface {
	CountRequeue(ctx context.Context, sel NoticeSelector) (int, error)
	BulkRequeue(ctx context.Context, sel NoticeSelector, nowMs int64) (int, error)
	BulkSkip(ctx context.Context, sel NoticeSelector, by, reason string, nowMs int64) (int, error)
}

// maxLastErrorChars is the last_error column's size.
const maxLastErrorChars = 1024

// SkipText is a skipped notice's last_error: who gave it up and why, then
// the error it died of, cut to the column's 1024 characters.
func SkipText(by, reason, lastError string) string {
	s := "skipped by " + by + ": " + reason + " (was: " + lastError + ")"
	if r := []rune(s); len(r) > maxLastErrorChars {
		s = string(r[:maxLastErrorChars])
	}
	return s
}
