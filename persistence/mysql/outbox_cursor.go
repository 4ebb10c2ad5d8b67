package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hyapp/roomcell/persistence"
)

// The IM relay's published marks go to each room's delivered cursor
// (room_outbox_cursors, schema/room/015): publishing a batch writes one
// cursor row and one delivered range per room, not a mark into each row.
// A row whose stored status is 'pending' and whose place in its room is at
// or below the cursor reads as published (deriveDelivered); rows keep
// their own status, retry_count and last_error otherwise. The cursor only
// passes a run of the room's rows that were all delivered: a row failed,
// released or parked in between stops it, and rows given to a mark after
// such a gap get the published mark in the row itself.

// coveredCond: the room_outbox row of the statement (its table unaliased)
// is at or below its room's delivered cursor.
const coveredCond = "EXISTS (SELECT 1 FROM room_outbox_cursors c WHERE c.app_code = room_outbox.app_code AND c.room_id = room_outbox.room_id" +
	" AND (room_outbox.room_seq < c.done_seq OR (room_outbox.room_seq = c.done_seq AND room_outbox.event_index <= c.done_index)))"

// waitingCond: the row reads as pending (stored pending, above its
// room's cursor).
const waitingCond = "status = 'pending' AND NOT " + coveredCond

// deliveredCond: the row reads as published.
const deliveredCond = "(status = 'published' OR (status = 'pending' AND " + coveredCond + "))"

// aboveCursor: row o is above cursor c (alias names).
func aboveCursor(o, c string) string {
	return "(" + o + ".room_seq > " + c + ".done_seq OR (" + o + ".room_seq = " + c + ".done_seq AND " + o + ".event_index > " + c + ".done_index))"
}

// firstWaiting is a column of a room's first waiting row, as a scalar
// subquery on the statement's room_outbox_cursors row (NULL: none).
func firstWaiting(col string) string {
	return "(SELECT " + col + " FROM room_outbox o FORCE INDEX (idx_room_outbox_room)" +
		" WHERE o.app_code = room_outbox_cursors.app_code AND o.room_id = room_outbox_cursors.room_id AND o.status = 'pending'" +
		" AND (o.room_seq > room_outbox_cursors.done_seq OR (o.room_seq = room_outbox_cursors.done_seq AND o.event_index > room_outbox_cursors.done_index))" +
		" ORDER BY o.room_seq, o.event_index LIMIT 1)"
}

// setWork is the SET of a room's work_ms and due_ms from its first
// waiting row.
var setWork = "work_ms = " + firstWaiting("o.created_at_ms") + ", due_ms = " + firstWaiting("GREATEST(o.created_at_ms, o.next_retry_at_ms)")

// roomCursor is a room_outbox_cursors row: the room's rows up to (seq,
// index) are delivered, the last advance at atMs.
type roomCursor struct {
	seq   int64
	index int
	atMs  int64
}

// noCursor is a room with nothing delivered by its cursor.
var noCursor = roomCursor{index: -1}

func (c roomCursor) covers(seq int64, index int) bool {
	return seq < c.seq || seq == c.seq && index <= c.index
}

// readCursors reads the cursors of keys (FOR UPDATE when lock: in key
// order, as every writer of cursor rows takes them). Rooms without a row
// have noCursor.
func readCursors(ctx context.Context, q querier, keys []persistence.RoomKey, lock bool) (map[persistence.RoomKey]roomCursor, error) {
	out := make(map[persistence.RoomKey]roomCursor, len(keys))
	for _, k := range keys {
		out[k] = noCursor
	}
	suffix := ""
	if lock {
		suffix = " ORDER BY app_code, room_id FOR UPDATE"
	}
	for part := range slices.Chunk(keys, 500) {
		in, args := roomArgs(part, nil)
		rs, err := q.QueryContext(ctx, "SELECT app_code, room_id, done_seq, done_index, done_at_ms FROM room_outbox_cursors"+
			" WHERE (app_code, room_id) IN ("+in+")"+suffix, args...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var (
				k persistence.RoomKey
				c roomCursor
			)
			if err := rs.Scan(&k.AppCode, &k.RoomID, &c.seq, &c.index, &c.atMs); err != nil {
				rs.Close()
				return nil, err
			}
			out[k] = c
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func roomOfRow(r persistence.OutboxRow) persistence.RoomKey {
	return persistence.RoomKey{AppCode: r.Envelope.AppCode, RoomID: r.Envelope.RoomID}
}

func compareKeys(a, b persistence.RoomKey) int {
	return cmp.Or(strings.Compare(a.AppCode, b.AppCode), strings.Compare(a.RoomID, b.RoomID))
}

// deriveDelivered shows rows as they read: a stored-pending row at or
// below its room's cursor is published at the time of the first delivered
// range at or above it (the cursor's last advance when the ranges were
// purged), with no error and no lease.
func (s *Store) deriveDelivered(ctx context.Context, q querier, rows []persistence.OutboxRow) error {
	var keys []persistence.RoomKey
	seen := map[persistence.RoomKey]bool{}
	for _, r := range rows {
		if k := roomOfRow(r); r.Status == persistence.OutboxPending && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	cursors, err := readCursors(ctx, q, keys, false)
	if err != nil {
		return err
	}
	// The lowest covered row of each room: its ranges from there on.
	low := map[persistence.RoomKey]persistence.OutboxRow{}
	for _, r := range rows {
		k := roomOfRow(r)
		if r.Status != persistence.OutboxPending || !cursors[k].covers(r.Envelope.RoomSeq, r.EventIndex) {
			continue
		}
		if l, ok := low[k]; !ok || persistence.CompareRoomOrder(r, l) < 0 {
			low[k] = r
		}
	}
	type span struct {
		seq   int64
		index int
		at    int64
	}
	ranges := make(map[persistence.RoomKey][]span, len(low))
	for k, r := range low {
		rs, err := q.QueryContext(ctx, "SELECT to_seq, to_index, published_at_ms FROM room_outbox_delivered"+
			" WHERE app_code = ? AND room_id = ? AND (to_seq > ? OR (to_seq = ? AND to_index >= ?)) ORDER BY to_seq, to_index",
			k.AppCode, k.RoomID, r.Envelope.RoomSeq, r.Envelope.RoomSeq, r.EventIndex)
		if err != nil {
			return err
		}
		for rs.Next() {
			var sp span
			if err := rs.Scan(&sp.seq, &sp.index, &sp.at); err != nil {
				rs.Close()
				return err
			}
			ranges[k] = append(ranges[k], sp)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
	}
	for i, r := range rows {
		k := roomOfRow(r)
		c := cursors[k]
		if r.Status != persistence.OutboxPending || !c.covers(r.Envelope.RoomSeq, r.EventIndex) {
			continue
		}
		at := c.atMs
		sps := ranges[k]
		if j, _ := slices.BinarySearchFunc(sps, r, func(sp span, r persistence.OutboxRow) int {
			return cmp.Or(cmp.Compare(sp.seq, r.Envelope.RoomSeq), cmp.Compare(sp.index, r.EventIndex))
		}); j < len(sps) {
			at = sps[j].at
		}
		rows[i].Status, rows[i].LastError = persistence.OutboxPublished, ""
		rows[i].PublishedAtMs, rows[i].UpdatedAtMs = at, at
		rows[i].LockedBy, rows[i].LockUntilMs = "", 0
	}
	return nil
}

// markDelivered is the IM relay's published mark of eventIDs: per chunk
// of ids one transaction that advances each room's cursor over the run of
// the room's waiting rows (from the cursor on) that the mark names, and
// marks the named rows after a gap in the row. Ids unknown, or of rows
// that no longer read as pending, are skipped. It returns how many of the
// ids were waiting. rows, when not nil, are the rows of eventIDs as
// claimed (their rooms and places, which a row never changes): the ids
// are then not looked up.
func (s *Store) markDelivered(ctx context.Context, op string, eventIDs []string, rows []persistence.OutboxRow, nowMs int64) (int, error) {
	if err := ready(ctx); err != nil {
		return 0, err
	}
	const chunk = 2000
	total := 0
	for lo := 0; lo < len(eventIDs); lo += chunk {
		hi := min(lo+chunk, len(eventIDs))
		var part []persistence.OutboxRow
		if rows != nil {
			part = rows[lo:hi]
		}
		var n int
		// Advances of one room serialise on its cursor row (taken in key
		// order); InnoDB may still pick the transaction as a deadlock
		// victim against a claim or an append: it wrote nothing then, so
		// running it again is safe.
		err := retryDeadlock(ctx, func() error {
			var err error
			n, err = s.markDeliveredChunk(ctx, eventIDs[lo:hi], part, nowMs)
			return err
		})
		if err != nil {
			return total, s.wrap(op, err)
		}
		total += n
	}
	return total, nil
}

// MarkOutboxPublishedRows implements persistence.OutboxRowsMarker.
func (s *Store) MarkOutboxPublishedRows(ctx context.Context, rows []persistence.OutboxRow, nowMs int64) error {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.Envelope.EventID
	}
	_, err := s.markDelivered(ctx, "mark published rows", ids, rows, nowMs)
	return err
}

// marked is one waiting row a mark names.
type marked struct {
	id    string
	seq   int64
	index int
}

func (s *Store) markDeliveredChunk(ctx context.Context, ids []string, rows []persistence.OutboxRow, nowMs int64) (int, error) {
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	// READ COMMITTED: the walk below runs after the cursors are locked and
	// reads every row committed before (an append of the room waits for
	// the cursor lock, so none commits during the walk).
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	named := map[persistence.RoomKey][]marked{}
	if rows != nil {
		for _, r := range rows {
			k := roomOfRow(r)
			named[k] = append(named[k], marked{id: r.Envelope.EventID, seq: r.Envelope.RoomSeq, index: r.EventIndex})
		}
	} else if named, err = namedRows(ctx, tx, ids); err != nil {
		return 0, err
	}
	if len(named) == 0 {
		return 0, nil
	}
	keys := make([]persistence.RoomKey, 0, len(named))
	for k := range named {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	cursors, err := readCursors(ctx, tx, keys, true)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		c := cursors[k]
		named[k] = slices.DeleteFunc(named[k], func(m marked) bool { return c.covers(m.seq, m.index) })
	}
	walked, err := walkRooms(ctx, tx, keys, cursors, named)
	if err != nil {
		return 0, err
	}
	var (
		inRow []any
		adv   []advance
		next  []any
		n     int
	)
	for _, k := range keys {
		if len(named[k]) == 0 {
			continue
		}
		a, rest, waiting := planAdvance(k, cursors[k], named[k], walked[k], nowMs)
		n += waiting
		inRow = append(inRow, rest...)
		adv = append(adv, a)
		if a.next != "" {
			next = append(next, a.next)
		}
	}
	if err := nextTimes(ctx, tx, adv, next); err != nil {
		return 0, err
	}
	if len(inRow) > 0 {
		res, err := tx.ExecContext(ctx, "UPDATE room_outbox SET "+publishedMark+" WHERE status = 'pending' AND event_id IN ("+placeholders(len(inRow))+")",
			append([]any{nowMs, nowMs}, inRow...)...)
		if err != nil {
			return 0, err
		}
		if m, err := res.RowsAffected(); err == nil {
			n += int(m)
		}
	}
	if err := writeAdvances(ctx, tx, adv); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// namedRows looks up the rooms and places of the stored-pending rows
// among ids.
func namedRows(ctx context.Context, tx *sql.Tx, ids []string) (map[persistence.RoomKey][]marked, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rs, err := tx.QueryContext(ctx, "SELECT event_id, app_code, room_id, room_seq, event_index FROM room_outbox"+
		" WHERE status = 'pending' AND event_id IN ("+placeholders(len(ids))+")", args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	named := map[persistence.RoomKey][]marked{}
	for rs.Next() {
		var (
			m marked
			k persistence.RoomKey
		)
		if err := rs.Scan(&m.id, &k.AppCode, &k.RoomID, &m.seq, &m.index); err != nil {
			return nil, err
		}
		named[k] = append(named[k], m)
	}
	return named, rs.Err()
}

// nextTimes fills in each advance's next waiting row's creation and due
// times: one lookup by primary key for all of them.
func nextTimes(ctx context.Context, tx *sql.Tx, adv []advance, next []any) error {
	if len(next) == 0 {
		return nil
	}
	rs, err := tx.QueryContext(ctx, "SELECT event_id, created_at_ms, GREATEST(created_at_ms, next_retry_at_ms) FROM room_outbox WHERE event_id IN ("+
		placeholders(len(next))+")", next...)
	if err != nil {
		return err
	}
	defer rs.Close()
	times := make(map[string][2]int64, len(next))
	for rs.Next() {
		var (
			id           string
			created, due int64
		)
		if err := rs.Scan(&id, &created, &due); err != nil {
			return err
		}
		times[id] = [2]int64{created, due}
	}
	if err := rs.Err(); err != nil {
		return err
	}
	for i := range adv {
		if t, ok := times[adv[i].next]; ok {
			adv[i].work, adv[i].due = t[0], t[1]
		} else if adv[i].next != "" {
			// Gone meanwhile (purged): the room is due now, to be safe
			// (a claim checks its first row itself).
			adv[i].work, adv[i].due = int64(0), int64(0)
		}
	}
	return nil
}

// walkRow is a room's row above its cursor, as the advance reads it.
type walkRow struct {
	id     string
	seq    int64
	index  int
	parked bool
}

// walkRooms reads, per room, its lowest waiting rows above the cursor (one
// more than the mark names) and its lowest parked row above the cursor:
// one statement (a UNION ALL of two reads of idx_room_outbox_room alone
// per room) per 250 rooms.
func walkRooms(ctx context.Context, q querier, keys []persistence.RoomKey, cursors map[persistence.RoomKey]roomCursor,
	named map[persistence.RoomKey][]marked) (map[persistence.RoomKey][]walkRow, error) {
	out := make(map[persistence.RoomKey][]walkRow, len(keys))
	var todo []persistence.RoomKey
	for _, k := range keys {
		if len(named[k]) > 0 {
			todo = append(todo, k)
		}
	}
	for part := range slices.Chunk(todo, 250) {
		var (
			b    strings.Builder
			args []any
		)
		for i, k := range part {
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			c := cursors[k]
			for j, st := range []struct {
				status string
				limit  int
			}{{"pending", len(named[k]) + 1}, {"parked", 1}} {
				if j > 0 {
					b.WriteString(" UNION ALL ")
				}
				b.WriteString("(SELECT app_code, room_id, event_id, room_seq, event_index, status = 'parked'" +
					" FROM room_outbox FORCE INDEX (idx_room_outbox_room) WHERE app_code = ? AND room_id = ? AND status = ?" +
					" AND (room_seq > ? OR (room_seq = ? AND event_index > ?)) ORDER BY room_seq, event_index LIMIT ?)")
				args = append(args, k.AppCode, k.RoomID, st.status, c.seq, c.seq, c.index, st.limit)
			}
		}
		rs, err := q.QueryContext(ctx, b.String(), args...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var (
				k persistence.RoomKey
				w walkRow
			)
			if err := rs.Scan(&k.AppCode, &k.RoomID, &w.id, &w.seq, &w.index, &w.parked); err != nil {
				rs.Close()
				return nil, err
			}
			out[k] = append(out[k], w)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, err
		}
	}
	for k := range out {
		slices.SortFunc(out[k], func(a, b walkRow) int { return cmp.Or(cmp.Compare(a.seq, b.seq), cmp.Compare(a.index, b.index)) })
	}
	return out, nil
}

// advance is one room's cursor write: when moved, its rows up to (seq,
// index) are delivered at atMs; work and due are the room's next waiting
// row's (next) creation and due times (nil: no waiting row left).
type advance struct {
	key       persistence.RoomKey
	seq       int64
	index     int
	atMs      int64
	moved     bool
	next      string
	work, due any
}

// planAdvance takes a room's walk (its waiting and first parked rows above
// cursor c, in room order) and the rows the mark names: the cursor moves
// over the leading run of named waiting rows (a parked row or an unnamed
// waiting row ends it); the named waiting rows after the run are returned
// to be marked in the row, with how many named rows were waiting. The
// walk read one waiting row more than the mark names, so either it read
// every waiting row above the cursor or an unnamed one is among them: the
// room's next waiting row is known.
func planAdvance(k persistence.RoomKey, c roomCursor, named []marked, walk []walkRow, nowMs int64) (advance, []any, int) {
	isNamed := make(map[string]bool, len(named))
	for _, m := range named {
		isNamed[m.id] = true
	}
	a := advance{key: k, seq: c.seq, index: c.index, atMs: c.atMs}
	var rest []any
	run, waiting := true, 0
	for _, w := range walk {
		switch {
		case w.parked:
			run = false
		case isNamed[w.id] && run:
			a.seq, a.index, a.atMs, a.moved = w.seq, w.index, nowMs, true
			waiting++
		case isNamed[w.id]:
			rest = append(rest, w.id)
		default:
			run = false
			if a.next == "" {
				a.next = w.id
			}
		}
	}
	// A named row the walk did not reach (an unnamed one came first) is
	// marked in the row if it is still pending (counted by that UPDATE).
	seen := make(map[string]bool, len(walk))
	for _, w := range walk {
		seen[w.id] = true
	}
	for _, m := range named {
		if !seen[m.id] && a.next != "" {
			rest = append(rest, m.id)
		}
	}
	return a, rest, waiting
}

// writeAdvances writes the rooms' delivered ranges (of the cursors that
// moved) and cursors, two statements for all of them.
func writeAdvances(ctx context.Context, tx *sql.Tx, adv []advance) error {
	if len(adv) == 0 {
		return nil
	}
	var (
		ranges, cursors strings.Builder
		rArgs, cArgs    []any
	)
	ranges.WriteString("INSERT INTO room_outbox_delivered (app_code, room_id, to_seq, to_index, published_at_ms) VALUES ")
	cursors.WriteString("INSERT INTO room_outbox_cursors (app_code, room_id, done_seq, done_index, done_at_ms, work_ms, due_ms) VALUES ")
	for i, a := range adv {
		if a.moved {
			if len(rArgs) > 0 {
				ranges.WriteByte(',')
			}
			ranges.WriteString("(?,?,?,?,?)")
			rArgs = append(rArgs, a.key.AppCode, a.key.RoomID, a.seq, a.index, a.atMs)
		}
		if i > 0 {
			cursors.WriteByte(',')
		}
		cursors.WriteString("(?,?,?,?,?,?,?)")
		cArgs = append(cArgs, a.key.AppCode, a.key.RoomID, a.seq, a.index, a.atMs, a.work, a.due)
	}
	ranges.WriteString(" ON DUPLICATE KEY UPDATE published_at_ms = published_at_ms")
	cursors.WriteString(" ON DUPLICATE KEY UPDATE done_seq = VALUES(done_seq), done_index = VALUES(done_index), done_at_ms = VALUES(done_at_ms)," +
		" work_ms = VALUES(work_ms), due_ms = VALUES(due_ms)")
	if len(rArgs) > 0 {
		if _, err := tx.ExecContext(ctx, ranges.String(), rArgs...); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, cursors.String(), cArgs...)
	return err
}

// resetWork sets the rooms' work_ms and due_ms from their first waiting
// row (NULL: none), under their cursor locks: an append of the
// room waits for the lock, so its rows are either seen here or set the
// room's work itself when it commits. Run after a failure, a park or a
// skip moved a room's next due time (later, or to nothing).
func (s *Store) resetWork(ctx context.Context, keys []persistence.RoomKey) error {
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, compareKeys)
	keys = slices.CompactFunc(keys, func(a, b persistence.RoomKey) bool { return compareKeys(a, b) == 0 })
	return retryDeadlock(ctx, func() error {
		cctx, cancel := s.opCtx(ctx)
		defer cancel()
		tx, err := s.db.BeginTx(cctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := readCursors(cctx, tx, keys, true); err != nil {
			return err
		}
		for part := range slices.Chunk(keys, 500) {
			in, args := roomArgs(part, nil)
			if _, err := tx.ExecContext(cctx, "UPDATE room_outbox_cursors SET "+setWork+" WHERE (app_code, room_id) IN ("+in+")", args...); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
}

// workDueBy makes the rooms of the rows matching cond due by dueMs at the
// latest and as old as those rows (a requeue made them due now): lowering
// work_ms and due_ms is always safe, a claim checks each room's first row
// itself.
func (s *Store) workDueBy(ctx context.Context, dueMs int64, cond string, args ...any) error {
	cctx, cancel := s.opCtx(ctx)
	defer cancel()
	_, err := s.db.ExecContext(cctx, "INSERT INTO room_outbox_cursors (app_code, room_id, work_ms, due_ms)"+
		" SELECT app_code, room_id, MIN(created_at_ms), ? FROM room_outbox WHERE "+cond+" GROUP BY app_code, room_id"+
		" ON DUPLICATE KEY UPDATE due_ms = LEAST(COALESCE(due_ms, VALUES(due_ms)), VALUES(due_ms)),"+
		" work_ms = LEAST(COALESCE(work_ms, VALUES(work_ms)), VALUES(work_ms))", append([]any{dueMs}, args...)...)
	return err
}

// roomOf is the room of an outbox row; ErrNotFound when there is none.
func (s *Store) roomOf(ctx context.Context, eventID string) (persistence.RoomKey, error) {
	cctx, cancel := s.opCtx(ctx)
	defer cancel()
	var k persistence.RoomKey
	err := s.db.QueryRowContext(cctx, "SELECT app_code, room_id FROM room_outbox WHERE event_id = ?", eventID).Scan(&k.AppCode, &k.RoomID)
	if errors.Is(err, sql.ErrNoRows) {
		return k, fmt.Errorf("mysql: outbox event %q: %w", eventID, persistence.ErrNotFound)
	}
	return k, err
}

// OutboxReadStatus is room_outbox.status as the store reads it, for SQL
// on the table outside the store (tests, an operator's ad-hoc query): a
// row its room's delivered cursor passed is 'published'. The table is
// named room_outbox, unaliased, in the statement.
const OutboxReadStatus = "IF(" + deliveredCond + ", 'published', status)"

// OutboxReadPublishedAt is room_outbox.published_at_ms as the store reads
// it (OutboxReadStatus's companion): a row its room's cursor passed has
// the time of the first delivered range at or above it.
const OutboxReadPublishedAt = "IF(status = 'pending' AND " + coveredCond + ", COALESCE((SELECT d.published_at_ms FROM room_outbox_delivered d" +
	" WHERE d.app_code = room_outbox.app_code AND d.room_id = room_outbox.room_id" +
	" AND (d.to_seq > room_outbox.room_seq OR (d.to_seq = room_outbox.room_seq AND d.to_index >= room_outbox.event_index))" +
	" ORDER BY d.to_seq, d.to_index LIMIT 1), published_at_ms), published_at_ms)"
