package persistence

import (
	"context"
	"encoding/json"
	"errors"
)

// Error classes. Backends wrap their driver errors in one of these so the
// room grain can decide between reload, retry and give-up with errors.Is.
var (
	// ErrConflict: the write lost a race (the seq or command_id of the room
	// is already taken, or a lease is held by someone else). Reload, then
	// retry.
	ErrConflict = errors.New("store conflict")
	// ErrUnavailable: the backend could not be reached or timed out. The
	// write may or may not have happened only where a method says so.
	ErrUnavailable = errors.New("store unavailable")
	// ErrNotFound: no such row.
	ErrNotFound = errors.New("not found")
)

// Outbox statuses of seed 000: the relay only ever moves pending to
// published.
const (
	OutboxPending   = "pending"
	OutboxPublished = "published"
)

// RoomKey names one room.
type RoomKey struct {
	AppCode string
	RoomID  string
}

// String is the room's cluster identity, "<app_code>/<room_id>".
func (k RoomKey) String() string { return k.AppCode + "/" + k.RoomID }

// Envelope is one persisted room event: the outbox row's payload and the
// core of the IM message. Its JSON form is the wire format; field names are
// the seeds'.
type Envelope struct {
	EventID     string          `json:"event_id"`
	EventType   string          `json:"event_type"`
	AppCode     string          `json:"app_code"`
	RoomID      string          `json:"room_id"`
	RoomSeq     int64           `json:"room_seq"`
	CommandID   string          `json:"command_id"`
	RequestID   string          `json:"request_id,omitempty"`
	CreatedAtMs int64           `json:"created_at_ms"`
	Payload     json.RawMessage `json:"payload"`
}

// Key returns the room the event belongs to.
func (e Envelope) Key() RoomKey { return RoomKey{AppCode: e.AppCode, RoomID: e.RoomID} }

// CommandRecord is one row of the room command log: the command that took
// seq, the reply the caller got (replayed verbatim for a duplicate
// command_id) and the events it produced (replayed on activation).
type CommandRecord struct {
	AppCode     string
	RoomID      string
	Seq         int64
	CommandID   string
	CommandType string
	Reply       []byte
	Events      []Envelope
	CreatedAtMs int64
}

// Key returns the room the record belongs to.
func (c CommandRecord) Key() RoomKey { return RoomKey{AppCode: c.AppCode, RoomID: c.RoomID} }

// Snapshot is a room's serialised state as of Seq.
type Snapshot struct {
	AppCode     string
	RoomID      string
	Seq         int64
	State       []byte
	UpdatedAtMs int64
}

// Key returns the room the snapshot belongs to.
func (s Snapshot) Key() RoomKey { return RoomKey{AppCode: s.AppCode, RoomID: s.RoomID} }

// Append is one atomic write of the room grain: the command log row, one
// outbox row (status pending) per event of the command, and optionally a
// snapshot. Either all of it is committed or none of it.
type Append struct {
	Command  CommandRecord
	Snapshot *Snapshot
	// Epoch is the writer's room-ownership epoch (the shard lease's). An
	// append whose Epoch is below the room's fence fails with ErrConflict
	// and writes nothing; one at or above it raises the fence, in the same
	// transaction. 0 = not fenced by epoch (single-node mode, which has no
	// second writer); the seq fence applies either way.
	Epoch int64
}

// RoomStore persists room command logs and snapshots.
type RoomStore interface {
	// Append writes a.Command, an outbox row per a.Command.Events and
	// a.Snapshot (if set, and only if newer than the stored one) in one
	// transaction. If the room already has a row with a.Command.Seq or
	// a.Command.CommandID it writes nothing and returns an error wrapping
	// ErrConflict: that is the single-writer fence.
	Append(ctx context.Context, a Append) error
	// LoadSnapshot returns the newest snapshot of the room, or ErrNotFound.
	LoadSnapshot(ctx context.Context, key RoomKey) (Snapshot, error)
	// LoadCommands returns the room's command log rows with seq > afterSeq,
	// in seq order.
	LoadCommands(ctx context.Context, key RoomKey, afterSeq int64) ([]CommandRecord, error)
	// FindCommand returns the room's command log row for commandID, or
	// ErrNotFound.
	FindCommand(ctx context.Context, key RoomKey, commandID string) (CommandRecord, error)
	// SaveSnapshot stores s unless a snapshot with seq >= s.Seq exists
	// (then it is a no-op, not an error).
	SaveSnapshot(ctx context.Context, s Snapshot) error
	// FenceRoom raises the room's epoch fence to epoch, so that no append
	// of an older epoch can land after it: a new owner calls it before it
	// loads the room. ErrConflict (nothing changed) when the fence is
	// already above epoch. epoch 0 is a no-op.
	FenceRoom(ctx context.Context, key RoomKey, epoch int64) error
}

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

// Store is a complete room backend.
type Store interface {
	RoomStore
	OutboxStore
	Close() error
}
