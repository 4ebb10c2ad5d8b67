package persistence

import "context"

// Outbox statuses of seed 000: the relay only ever moves pending to
// published. wallet_outbox rows use the same two values.
const (
	OutboxPending   = "pending"
	OutboxPublished = "published"
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
	// LockedBy and LockUntilMs are the relay's claim lease: a row claimed
	// by one relay is not handed to another until the lease expires.
	LockedBy    string
	LockUntilMs int64
}

// OutboxStats summarises the pending backlog for metrics.
type OutboxStats struct {
	Pending           int64
	OldestCreatedAtMs int64 // 0 when nothing is pending
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
	// ClaimPendingOutbox leases up to limit pending rows whose lease is
	// free or expired (LockUntilMs <= nowMs) to owner until nowMs+leaseMs,
	// oldest first, and returns them. Two callers never get the same row
	// while its lease runs.
	ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]OutboxRow, error)
	// MarkOutboxPublished sets status published, last_error NULL,
	// published_at_ms and clears the lease. Marking a published row again is
	// a no-op. ErrNotFound for an unknown event.
	MarkOutboxPublished(ctx context.Context, eventID string, nowMs int64) error
	// MarkOutboxPublishedBatch is MarkOutboxPublished for many rows in one
	// write (the relay's marks would otherwise cost a commit each). Rows
	// already published and unknown ids are skipped, not errors.
	MarkOutboxPublishedBatch(ctx context.Context, eventIDs []string, nowMs int64) error
	// MarkOutboxFailed keeps the row pending, adds one to retry_count,
	// stores lastError and clears the lease. A published row is left
	// alone. ErrNotFound for an unknown event.
	MarkOutboxFailed(ctx context.Context, eventID, lastError string, nowMs int64) error
	// ReleaseOutbox clears the lease of a pending row without counting a
	// failure (operator "retry now").
	ReleaseOutbox(ctx context.Context, eventID string) error
	// GetOutbox returns one row, or ErrNotFound.
	GetOutbox(ctx context.Context, eventID string) (OutboxRow, error)
	// ListOutbox returns rows for operators, oldest first.
	ListOutbox(ctx context.Context, f OutboxFilter) ([]OutboxRow, error)
	// OutboxStats counts pending rows and finds the oldest one.
	OutboxStats(ctx context.Context) (OutboxStats, error)
}

// RoomOutboxReader is a read-only view of room_outbox for consumers other
// than the relay (the room notice worker): rows of one event type after the
// cursor (afterMs, afterID) in (created_at_ms, event_id) order. It never
// writes: room_outbox.status belongs to the relay.
type RoomOutboxReader interface {
	RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]OutboxRow, error)
}
