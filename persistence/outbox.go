package persistence

import (
	"cmp"
	"context"
	"slices"
)

// Outbox statuses. status describes the IM channel only. Seed 000 has
// pending and published; parked and skipped are the "manual handling"
// the seed leaves to operators: a parked row can never succeed as it is
// (undecodable envelope, a permanent IM error) and waits for an operator's
// requeue (back to pending) or skip (done without a send, recorded who,
// when and why). Retention may purge published rows, never pending or
// parked ones, nor a row the MQ fanout has still to publish (MQStatus
// pending). wallet_outbox rows use pending and published.
const (
	OutboxPending   = "pending"
	OutboxPublished = "published"
	OutboxParked    = "parked"
	OutboxSkipped   = "skipped"
)

// OutboxRow is a room_outbox row.
type OutboxRow struct {
	Envelope Envelope
	// EventIndex is the event's place in its command's events (0 for the
	// first). A room's rows go out in (room_seq, EventIndex) order: a
	// command's events share its room_seq, and the event id's text would
	// put the 11th event before the 2nd.
	EventIndex    int
	Status        string
	RetryCount    int
	LastError     string
	CreatedAtMs   int64
	UpdatedAtMs   int64
	PublishedAtMs int64
	// LockedBy and LockUntilMs are the claim lease: a row claimed by one
	// sender (a relay, or the room's own publisher) is not handed to
	// another until the lease expires. A claim leases the room, not each
	// row (one lease per claimed room, up to the last row it took: a
	// published row is written once after its insert); readers see that
	// lease on each pending row it holds. Rows a publisher leases at
	// insert carry their own. A failed or released row leaves its room's
	// lease and shows none.
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
	// MQStatus is the message-queue fanout's own progress, apart from
	// Status (the IM channel's): OutboxMQNone when the fanout was off as
	// the row was written, else pending until the fanout published it
	// (OutboxMQPublished) or found it can never be published (OutboxMQParked).
	// MQLockedBy/MQLockUntilMs are the fanout's own claim lease. The IM
	// claims (ClaimPendingOutbox, ClaimRoomOutbox) may leave these four
	// empty: the MySQL store keeps them in a table of their own and the
	// IM relay never reads them.
	MQStatus        string
	MQPublishedAtMs int64
	MQLockedBy      string
	MQLockUntilMs   int64
	// EffectsDone is the set of the event's effect steps at Tencent (its
	// group message, a kick's ban, the audio room's removal, ...) that a
	// sender finished, as bits the sender defines (delivery/roomim): a
	// sender retrying the row, in any process, skips them. 0 for a new row
	// and for events without effects.
	EffectsDone uint32
}

// MQ fanout statuses of a room_outbox row (OutboxRow.MQStatus). They move
// independently of the IM status: an IM outage never holds back the fanout
// and an MQ outage never makes an IM message go again.
const (
	OutboxMQNone      = "none"
	OutboxMQPending   = "pending"
	OutboxMQPublished = "published"
	OutboxMQParked    = "parked"
)

// OutboxStats summarises the pending backlog for metrics.
type OutboxStats struct {
	Pending           int64
	OldestCreatedAtMs int64 // 0 when nothing is pending
	Parked            int64
	// MQPending counts rows the MQ fanout has not published yet.
	MQPending int64
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
	// rows are leased together. Rooms come oldest first (by the creation
	// time of their oldest due free row, so a room's wait is bounded by the
	// rows ahead of it, whatever its name and however much new load other
	// rooms get); rooms another owner holds do not take the place of free
	// ones behind them; at most limit rows in all. The result is grouped by room,
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
	// the lease (the row leaves its room's lease; the room's other rows
	// stay with their sender). A row that is not pending is left alone. ErrNotFound for
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
	// failure (operator "retry now", or rows a sender gives back unsent);
	// the room's other rows stay with their sender.
	ReleaseOutbox(ctx context.Context, eventID string) error
	// ReleaseOutboxBatch is ReleaseOutbox for many rows in one write: a
	// sender giving back what it could not send (IM down or over quota)
	// would otherwise cost a commit a row. Rows no longer pending and
	// unknown ids are skipped, not errors.
	ReleaseOutboxBatch(ctx context.Context, eventIDs []string) error
	// MarkOutboxEffectsDone adds steps (bits) to the row's EffectsDone,
	// keeping the ones already there, whatever the row's status: a step
	// done stays done (a requeued row skips it too). Nothing else of the
	// row changes. ErrNotFound for an unknown event.
	MarkOutboxEffectsDone(ctx context.Context, eventID string, steps uint32) error
	// GetOutbox returns one row, or ErrNotFound.
	GetOutbox(ctx context.Context, eventID string) (OutboxRow, error)
	// ListOutbox returns rows for operators, oldest first.
	ListOutbox(ctx context.Context, f OutboxFilter) ([]OutboxRow, error)
	// OutboxStats counts pending and parked rows and finds the oldest
	// pending one.
	OutboxStats(ctx context.Context) (OutboxStats, error)
	OutboxBulkStore
}

// OutboxMQStore is the message-queue fanout's view of room_outbox: its own
// claim, lease and marks, on columns the IM relay never reads or writes.
// A store writes new rows with MQStatus pending when it was opened with
// the fanout on (the room_outbox topic configured), OutboxMQNone
// otherwise, so a deployment without the fanout never accumulates rows
// that retention must keep.
type OutboxMQStore interface {
	// ClaimOutboxMQ leases MQ-pending rows to owner until nowMs+leaseMs,
	// room by room, as ClaimPendingOutbox does: a room is taken only when
	// none of its MQ-pending rows is under a live MQ lease (the owner's
	// own included: a claimer marks or releases what it took), and then
	// its lowest MQ-pending rows are leased together. Rooms come oldest
	// first (by the creation time of their oldest free MQ-pending row); at
	// most limit rows in all, grouped by room, each room's rows in
	// ascending room_seq. Two owners never hold rows of one room at the
	// same time, so a room's events reach the topic in room_seq order
	// whichever nodes run the fanout. The IM status plays no part.
	ClaimOutboxMQ(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]OutboxRow, error)
	// MarkOutboxMQPublished sets MQStatus published and MQPublishedAtMs on
	// the pending ones of eventIDs and clears their MQ lease, in one write.
	// Unknown ids and rows not pending are skipped.
	MarkOutboxMQPublished(ctx context.Context, eventIDs []string, nowMs int64) error
	// ParkOutboxMQ sets a pending row's MQStatus parked (it can never be
	// published as it is; the IM channel is not affected). ErrNotFound for
	// an unknown event.
	ParkOutboxMQ(ctx context.Context, eventID string) error
	// ReleaseOutboxMQ clears the MQ leases of eventIDs (a failed publish:
	// the rows are claimable again at once).
	ReleaseOutboxMQ(ctx context.Context, eventIDs []string) error
}

// RoomOutboxReader is a read-only view of room_outbox for consumers other
// than the relay (the room notice worker): rows of one event type after the
// cursor (afterMs, afterID) in (created_at_ms, event_id) order. It never
// writes: room_outbox.status belongs to the relay.
type RoomOutboxReader interface {
	RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]OutboxRow, error)
}

// GroupByRoom reorders rows in place: grouped by room, rooms in the order
// of their first row, each room's rows in room_seq order (the MQ claim's
// result order on both backends).
func GroupByRoom(rows []OutboxRow) {
	key := func(r OutboxRow) RoomKey { return RoomKey{AppCode: r.Envelope.AppCode, RoomID: r.Envelope.RoomID} }
	first := map[RoomKey]int{}
	for i, r := range rows {
		if _, ok := first[key(r)]; !ok {
			first[key(r)] = i
		}
	}
	slices.SortStableFunc(rows, func(a, b OutboxRow) int {
		if fa, fb := first[key(a)], first[key(b)]; fa != fb {
			return fa - fb
		}
		return CompareRoomOrder(a, b)
	})
}

// CompareListOrder is the operators' and ListPendingOutbox's order:
// oldest first, then by room, then in the room's order (the event id's
// text alone would list a command's 11th event before its 2nd).
func CompareListOrder(a, b OutboxRow) int {
	if c := cmp.Compare(a.CreatedAtMs, b.CreatedAtMs); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Envelope.AppCode, b.Envelope.AppCode); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Envelope.RoomID, b.Envelope.RoomID); c != 0 {
		return c
	}
	if c := CompareRoomOrder(a, b); c != 0 {
		return c
	}
	return cmp.Compare(a.Envelope.EventID, b.Envelope.EventID)
}

// CompareRoomOrder orders two rows of one room as they must go out: by
// room_seq, then by their index in the command.
func CompareRoomOrder(a, b OutboxRow) int {
	if c := cmp.Compare(a.Envelope.RoomSeq, b.Envelope.RoomSeq); c != 0 {
		return c
	}
	return cmp.Compare(a.EventIndex, b.EventIndex)
}
