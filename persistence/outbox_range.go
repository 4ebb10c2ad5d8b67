package persistence

import "context"

// OutboxRun is a run of one room's rows a sender claimed together and
// published, consecutive in the room's order: from (FromSeq, FromIndex)
// to (ToSeq, ToIndex), both included, as (room_seq, event_index).
type OutboxRun struct {
	Room      RoomKey
	FromSeq   int64
	FromIndex int
	ToSeq     int64
	ToIndex   int
}

// OutboxRunMarker is implemented by stores that mark a sender's published
// rows by their runs: a claim takes each room's lowest pending rows in
// order, so what it published is a few runs, and naming a run's bounds
// costs the database far less than naming each of its rows.
type OutboxRunMarker interface {
	// MarkOutboxPublishedRuns is MarkOutboxPublishedBatch for the rows
	// of runs: it marks published every row in a run's bounds that is
	// pending and not given back (a failed, released or requeued row has
	// left its sender's lease and is not marked). Rows not pending are
	// left alone. The caller names only runs of rows it claimed and
	// published: rows of a room between two rows of one claim were in
	// that claim or not pending when it was taken, and a row written
	// after it comes later in the room's order.
	MarkOutboxPublishedRuns(ctx context.Context, runs []OutboxRun, nowMs int64) error
}
