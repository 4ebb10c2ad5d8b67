package persistence

import (
	"context"
	"encoding/json"

	"github.com/hyapp/roomcell/room"
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
	TraceParent string          `json:"traceparent,omitempty"` // W3C, of the command that wrote the event ("" = not traced); senders link to it
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
	// RequestHash fingerprints the request the command_id answered (the
	// room computes it; "" on rows older than the column), so a reused
	// command_id with a different request can be refused after a restart.
	RequestHash string
	Reply       []byte
	Events      []Envelope
	CreatedAtMs int64
	// Sealed is what the command's events carry beside their payloads
	// (room.SealedOf: a room password's verifier), nil for most rows. It
	// is kept with the row and never with the events: the outbox, IM,
	// MQ and the event feeds never see it; replay attaches it again.
	Sealed []byte
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
	// Lease, when set, writes the outbox rows already leased to the room's
	// own publisher, so no relay takes them while the room publishes them
	// itself (one sender per room).
	Lease *OutboxLease
	// Gift marks a charged gift: the append also records the gift outcome
	// "sent" for Command.CommandID, and fails with ErrConflict if
	// VoidGift already voided it (the wallet then refunds it).
	Gift bool
}

// OutboxLease is a claim on outbox rows: Owner until UntilMs.
type OutboxLease struct {
	Owner   string
	UntilMs int64
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
	// VoidGift decides a gift command for good: if an Append with Gift set
	// committed commandID it reports sent; otherwise it records the
	// outcome "void", after which no append of commandID can commit, and
	// reports not sent. Calling it again gives the same answer.
	VoidGift(ctx context.Context, key RoomKey, commandID string, nowMs int64) (sent bool, err error)
	// FenceRoom raises the room's epoch fence to epoch, so that no append
	// of an older epoch can land after it: a new owner calls it before it
	// loads the room. ErrConflict (nothing changed) when the fence is
	// already above epoch. epoch 0 is a no-op.
	FenceRoom(ctx context.Context, key RoomKey, epoch int64) error
}

// Store is a complete room backend.
type Store interface {
	RoomStore
	OutboxStore
	OutboxMQStore
	Close() error
}

// DecodeEvents decodes a stored command's envelopes into the room's
// events, in their order.
func DecodeEvents(envs []Envelope) ([]room.Event, error) {
	evs := make([]room.Event, 0, len(envs))
	for _, e := range envs {
		ev, err := room.DecodeEvent(e.EventType, e.Payload)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
