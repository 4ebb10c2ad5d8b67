package mysql

import (
	"context"
	"database/sql"

	"github.com/hyapp/roomcell/persistence"
)

// RoomOutboxReader is the notice workers' read-only view of a room
// database's room_outbox (actors/notice/roomnotice.Source): through the
// notice store's pool (NoticeStore.RoomOutbox), or through a room store's
// own pool (Store.RoomOutbox, for room databases on other servers). It
// never writes: room_outbox.status and its lease belong to the room relay.
type RoomOutboxReader struct {
	db    *sql.DB
	table string // `<room_database>`.room_outbox, or room_outbox of the pool's database
	begin func(context.Context) (context.Context, context.CancelFunc, error)
	wrap  func(op string, err error) error
}

// RoomOutbox returns the reader of the configured room database.
func (s *NoticeStore) RoomOutbox() *RoomOutboxReader {
	return &RoomOutboxReader{db: s.db, table: "`" + s.roomDB + "`.room_outbox", begin: s.begin, wrap: s.wrap}
}

// RoomOutbox returns the reader of this room store's database, over its
// own pool and mysql.query_timeout.
func (s *Store) RoomOutbox() *RoomOutboxReader {
	return &RoomOutboxReader{db: s.db, table: "room_outbox", wrap: s.wrap,
		begin: func(ctx context.Context) (context.Context, context.CancelFunc, error) {
			if err := ready(ctx); err != nil {
				return nil, nil, err
			}
			ctx, cancel := s.opCtx(ctx)
			return ctx, cancel, nil
		}}
}

// RoomOutboxAfter returns up to limit rows of eventType with
// (created_at_ms, event_id) > (afterMs, afterID) in that order, whatever
// their status. It range-scans idx_room_outbox_type_created (schema/room
// 002) from the cursor and stops after limit rows. An envelope that does
// not decode comes back typed from its columns (as the relay's reads do).
func (s *RoomOutboxReader) RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]persistence.OutboxRow, error) {
	if limit <= 0 || eventType == "" {
		return nil, nil
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.db.QueryContext(ctx, "SELECT "+outboxColumns+" FROM "+s.table+
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
	shownLease(out)
	return out, nil
}
