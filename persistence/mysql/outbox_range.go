package mysql

import (
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/hyapp/roomcell/persistence"
)

// runsPerMark bounds the runs one statement of MarkOutboxPublishedRuns
// names (a relay's claim has a few runs per room it took).
const runsPerMark = 200

// MarkOutboxPublishedRuns implements persistence.OutboxRunMarker: one
// UPDATE per 200 runs, each run a range of idx_room_outbox_room, in a
// READ COMMITTED transaction. The ids' IN list of MarkOutboxPublishedBatch
// costs MariaDB's range optimizer a tree of 500 keys a claim; a run is one
// range. READ COMMITTED because a range read under REPEATABLE READ would
// also lock the gap after each run, where the room's next append inserts
// its rows.
func (s *Store) MarkOutboxPublishedRuns(ctx context.Context, runs []persistence.OutboxRun, nowMs int64) error {
	if err := ready(ctx); err != nil {
		return err
	}
	for part := range slices.Chunk(runs, runsPerMark) {
		where, args := runRanges(part, []any{nowMs, nowMs})
		// A claim of the same rooms may pick this statement as a deadlock
		// victim; it changes only rows still pending, so running it again
		// is safe.
		err := retryDeadlock(ctx, func() error {
			cctx, cancel := s.opCtx(ctx)
			defer cancel()
			tx, err := s.db.BeginTx(cctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(cctx, "UPDATE room_outbox FORCE INDEX (idx_room_outbox_room) SET "+publishedMark+
				" WHERE status = 'pending' AND lock_until_ms >= 0 AND ("+where+")", args...); err != nil {
				return err
			}
			return tx.Commit()
		})
		if err != nil {
			return s.wrap("mark published runs", err)
		}
	}
	return nil
}

// runRanges renders runs as an OR of one range per run over
// (app_code, room_id, room_seq, event_index), its arguments appended to
// args.
func runRanges(runs []persistence.OutboxRun, args []any) (string, []any) {
	var b strings.Builder
	for i, r := range runs {
		if i > 0 {
			b.WriteString(" OR ")
		}
		if r.FromSeq == r.ToSeq {
			b.WriteString("(app_code = ? AND room_id = ? AND room_seq = ? AND event_index BETWEEN ? AND ?)")
			args = append(args, r.Room.AppCode, r.Room.RoomID, r.FromSeq, r.FromIndex, r.ToIndex)
			continue
		}
		b.WriteString("(app_code = ? AND room_id = ? AND (room_seq = ? AND event_index >= ? OR room_seq > ? AND room_seq < ? OR room_seq = ? AND event_index <= ?))")
		args = append(args, r.Room.AppCode, r.Room.RoomID, r.FromSeq, r.FromIndex, r.FromSeq, r.ToSeq, r.ToSeq, r.ToIndex)
	}
	return b.String(), args
}
