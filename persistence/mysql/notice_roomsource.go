package mysql

import (
	"context"

	"github.com/hyapp/roomcell/persistence"
)

// RoomOutboxReader is the notice workers' read-only view of
// `<room_database>`.room_outbox through the notice store's pool
// (actors/notice/roomnotice.Source). It never writes: room_outbox.status
// and its lease belong to the room relay.
type RoomOutboxReader struct{ s *NoticeStore }

// RoomOutbox returns the reader of the configured room database.
func (s *NoticeStore) RoomOutbox() *RoomOutboxReader { return &RoomOutboxReader{s} }

// RoomOutboxAfter returns up to limit rows of eventType with
// (created_at_ms, event_id) > (afterMs, afterID) in that order, whatever
// their status. It range-scans idx_room_outbox_type_created (schema/room
// 002) from the cursor and stops after limit rows. An envelope that does
// not decode comes back typed from its columns (as the relay's reads do).
func (r *RoomOutboxReader) RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]persistence.OutboxRow, error) {
	s := r.s
	if limit <= 0 || eventType == "" {
		return nil, nil
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.db.QueryContext(ctx, "SELECT "+outboxColumns+" FROM `"+s.roomDB+"`.room_outbox"+
		" WHERE event_type = ? AND created_at_ms >= ? AND (created_at_ms > ? OR event_id > ?)"+
		" ORDER BY created_at_ms, event_id LIMIT ?", eventType, afterMs, afterMs, afterID, limit)
	if err != nil {
		return nil, s.wrap("read room outbox", err)
	}
	defer rows.Close()
	var out []persistence.OutboxRow
	for rows.Next() {
		row, err := scanOutbox(rows)
		if err != nil {
			return nil, s.wrap("read room outbox", err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("read room outbox", err)
	}
	return out, nil
}
