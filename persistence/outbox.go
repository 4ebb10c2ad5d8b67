package persistence

import "context"

// Outbox statuses. status describes the IM channel only. Seed 000 has
// pending and published; parked and skipped are the "manual handling"
// the seed leaves to operators: a parked row can never succeed as it is
// (undecodable envelope, a permanent IM error) and waits for an operator's
// requeue (back to pending) or skip (done without a send, recorded who,
// when and why). Retention may purge published and skipped rows, never
// pending or parked ones. wallet_outbox rows use pending and published.
const (
	OutboxPending   = "pending"
	OutboxPublished = "published"
	OutboxParked    = "parked"
	OutboxSkipped   = "skipped"
)

// OutboxRow is a room_outbox row.
type OutboxRow struct {
	Envelope      Envelope
	Status        string
	RetryCount    int
	LastError     string
	CreatedAtMs   int64
	UpdatedAtMs   int64
	PublishedAtMs int64
	// LockedBy and LockUntilMs are the claim lease: a row claimed by one
	// sender (a relay, or the room's own publisher) is not handed to
	// another until the lease expires.
	LockedBy    string
	LockUntilMs int64
	// NextRetryAtMs: a pending row is not claimed before it (its created_at_ms
	// for a new row, the retry strategy's due time after a failure).
	NextRetryAtMs int64
	// ResolvedBy, ResolvedAtMs and Resolution record an operator's skip or
	// the reason a row was parked.
	ResolvedBy   string
	ResolvedAtMs int64
	Resolution   string
}

// OutboxStats summarises the pending backlog for metrics.
type OutboxStats struct {
	Pending           int64
	OldestCreatedAtMs int64 // 0 when nothing is pending
	Parked            int64
}

// OutboxFilter selects rows for operators (roomctl outbox list).
type OutboxFilter struct {
	Status string // "" = any
	Limit  int
}

// OutboxStore is the relay's and the operators' view of room_outbox.
type OutboxStore interface {
	// ListPendingOutbox returns up to limit pending rows, oldest first,
	// ignoring leases (seed 000's single-relay scan).
	ListPendingOutbox(ctx context.Context, limit int) ([]OutboxRow, error)
	// ClaimPendingOutbox leases pending rows to owner until nowMs+leaseMs,
	// room by room: a room is taken only when no pending row of it is under
	// another owner's live lease (LockUntilMs > nowMs) and its lowest
	// pending row is due (NextRetryAtMs <= nowMs); then its lowest pending
	// rows are leased together. Rooms come in the order of their earliest
	// due row; at most limit rows in all. The result is grouped by room,
	// each room's rows in ascending room_seq. Two owners never hold rows of
	// one room at the same time, so a room has one sender.
	ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]OutboxRow, error)
	// ClaimRoomOutbox is ClaimPendingOutbox for one room (its own
	// publisher catching up): the room's lowest pending rows, or nothing
	// when another owner holds the room or its lowest row is not due. Rows
	// the owner already holds count as free.
	ClaimRoomOutbox(ctx context.Context, key RoomKey, owner string, nowMs, leaseMs int64, limit int) ([]OutboxRow, error)
	// MarkOutboxPublished sets status published, last_error NULL,
	// published_at_ms and clears the lease. Marking a published row again is
	// a no-op. ErrNotFound for an unknown event.
	MarkOutboxPublished(ctx context.Context, eventID string, nowMs int64) error
	// MarkOutboxPublishedBatch is MarkOutboxPublished for many rows in one
	// write (the relay's marks would otherwise cost a commit each). Rows
	// already published and unknown ids are skipped, not errors.
	MarkOutboxPublishedBatch(ctx context.Context, eventIDs []string, nowMs int64) error
	// MarkOutboxFailed keeps the row pending, adds one to retry_count,
	// stores lastError, sets next_retry_at_ms to nextRetryAtMs and clears
	// the lease. A row that is not pending is left alone. ErrNotFound for
	// an unknown event.
	MarkOutboxFailed(ctx context.Context, eventID, lastError string, nowMs, nextRetryAtMs int64) error
	// ParkOutbox moves a pending row to parked (retry_count+1, lastError,
	// lease cleared): it is not retried and no longer holds back its room.
	// A row that is not pending is left alone. ErrNotFound for an unknown
	// event.
	ParkOutbox(ctx context.Context, eventID, lastError string, nowMs int64) error
	// RequeueOutbox puts a parked (or pending) row back to pending, due at
	// once. A live lease of a pending row is kept: the sender holding it
	// finishes first, so the room keeps one sender. ErrConflict for a
	// published or skipped row, ErrNotFound for an unknown one.
	RequeueOutbox(ctx context.Context, eventID string, nowMs int64) error
	// SkipOutbox marks a parked or pending row skipped (done without a
	// send) and records by, nowMs and reason. ErrConflict for a published
	// row (a skipped one is left as it is), ErrNotFound for an unknown one.
	SkipOutbox(ctx context.Context, eventID, by, reason string, nowMs int64) error
	// ReleaseOutbox clears the lease of a pending row without counting a
	// failure (operator "retry now", or rows a sender gives back unsent).
	ReleaseOutbox(ctx context.Context, eventID string) error
	// GetOutbox returns one row, or ErrNotFound.
	GetOutbox(ctx context.Context, eventID string) (OutboxRow, error)
	// ListOutbox returns rows for operators, oldest first.
	ListOutbox(ctx context.Context, f OutboxFilter) ([]OutboxRow, error)
	// OutboxStats counts pending and parked rows and finds the oldest
	// pending one.
	OutboxStats(ctx context.Context) (OutboxStats, error)
}

// RoomOutboxReader is a read-only view of room_outbox for consumers other
// than the relay (the room notice worker): rows of one event type after the
// cursor (afterMs, afterID) in (created_at_ms, event_id) order. It never
// writes: room_outbox.status belongs to the relay.
type RoomOutboxReader interface {
	RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]OutboxRow, error)
}
