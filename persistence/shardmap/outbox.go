package shardmap

import (
	"cmp"
	"context"
	"slices"

	"github.com/hyapp/roomcell/persistence"
)

// RoomOutboxes reads room_outbox of every room database as one: the
// notice workers' cursor ((created_at_ms, event_id)) runs over the union.
// The room notice worker scans its Parts one by one instead
// (roomnotice.PartsScanner), so that one database that is slow holds up
// only its own rows; RoomOutboxAfter is the union read for other readers.
// Each database returns its first limit rows after the cursor; the first
// limit of their merge are the union's, since no row of a database can
// come before that database's own first ones. A database that does not
// answer fails the read, naming it: skipping it would move the cursor
// past its rows, and the kick notices of its rooms would be lost.
type RoomOutboxes struct {
	Keys    []string
	Readers []persistence.RoomOutboxReader
}

// RoomOutboxAfter implements persistence.RoomOutboxReader.
func (o RoomOutboxes) RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]persistence.OutboxRow, error) {
	var rows []persistence.OutboxRow
	for i, r := range o.Readers {
		part, err := r.RoomOutboxAfter(ctx, eventType, afterMs, afterID, limit)
		if err != nil {
			return nil, persistence.InRoomDB(o.Keys[i], err)
		}
		rows = append(rows, part...)
	}
	slices.SortFunc(rows, func(a, b persistence.OutboxRow) int {
		return cmp.Or(cmp.Compare(a.CreatedAtMs, b.CreatedAtMs), cmp.Compare(a.Envelope.EventID, b.Envelope.EventID))
	})
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, nil
}

// Parts returns the databases' keys and readers (roomnotice.PartedSource).
func (o RoomOutboxes) Parts() ([]string, []persistence.RoomOutboxReader) {
	return o.Keys, o.Readers
}
