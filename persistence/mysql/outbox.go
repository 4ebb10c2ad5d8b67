package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hyapp/roomcell/persistence"
)

// outboxColumns are room_outbox's columns as scanOutbox reads them. The
// MQ fanout's progress is in room_outbox_mq (withMQ reads it for the
// operators' and the fanout's reads; the IM claim does not).
const outboxColumns = "event_id, envelope, status, retry_count, last_error, created_at_ms, updated_at_ms, published_at_ms, locked_by, lock_until_ms, event_type, app_code, room_id, room_seq, next_retry_at_ms, resolved_by, resolved_at_ms, resolution, effects_done, event_index"

func scanOutbox(sc interface{ Scan(...any) error }) (persistence.OutboxRow, error) {
	var (
		r         persistence.OutboxRow
		eventID   string
		envelope  []byte
		lastError sql.NullString
		published sql.NullInt64
		lockedBy  sql.NullString
		col       persistence.Envelope
		resBy     sql.NullString
		resAt     sql.NullInt64
		res       sql.NullString
	)
	if err := sc.Scan(&eventID, &envelope, &r.Status, &r.RetryCount, &lastError, &r.CreatedAtMs, &r.UpdatedAtMs, &published, &lockedBy, &r.LockUntilMs,
		&col.EventType, &col.AppCode, &col.RoomID, &col.RoomSeq, &r.NextRetryAtMs, &resBy, &resAt, &res,
		&r.EffectsDone, &r.EventIndex); err != nil {
		return r, err
	}
	env, err := decodeEnvelope(envelope)
	if err != nil {
		// One corrupt envelope must not fail every scan that meets it:
		// hand the row back with what its own columns say and no payload,
		// so the relay sees a corrupt envelope, marks it and goes on.
		col.EventID = eventID
		col.CreatedAtMs = r.CreatedAtMs
		env = col
	}
	r.Envelope = env
	r.LastError = lastError.String
	r.PublishedAtMs = published.Int64
	r.LockedBy = lockedBy.String
	r.ResolvedBy, r.ResolvedAtMs, r.Resolution = resBy.String, resAt.Int64, res.String
	// A mark leaves the lease's owner in the row (writing NULL there would
	// resize the record): a lease means something only on a pending row.
	if r.Status != persistence.OutboxPending {
		r.LockedBy, r.LockUntilMs = "", 0
	}
	return r, nil
}

// queryOutbox runs a room_outbox SELECT on q (the pool or a transaction).
func (s *Store) queryOutbox(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, op, query string, args ...any) ([]persistence.OutboxRow, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer rows.Close()
	var out []persistence.OutboxRow
	for rows.Next() {
		r, err := scanOutbox(rows)
		if err != nil {
			return nil, s.wrap(op, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}

// listOrder is persistence.CompareListOrder in SQL.
const listOrder = "created_at_ms, app_code, room_id, room_seq, event_index, event_id"

// ListPendingOutbox implements persistence.OutboxStore. limit <= 0 returns
// nothing: a scan is always bounded. It reads the pending entries of
// idx_room_outbox_pending (the backlog) and sorts them in listOrder (the
// index's event_id order would list a command's 11th event before its
// 2nd); seed 000's scan and the tests', not the relay's claim.
func (s *Store) ListPendingOutbox(ctx context.Context, limit int) ([]persistence.OutboxRow, error) {
	if err := ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	rows, err := s.queryOutbox(ctx, s.db, "list pending outbox",
		"SELECT "+outboxColumns+" FROM room_outbox WHERE status = 'pending' ORDER BY "+listOrder+" LIMIT ?", limit)
	if err != nil {
		return nil, err
	}
	return s.shownRows(ctx, "list pending outbox", rows)
}

// claimScanPage is the least number of due rows one page of the claim's
// room scan reads; a page is otherwise the claim's limit. Each row the
// scan reads costs a row lookup (the room and the lease are not in
// idx_room_outbox_pending), so a page reads about what the claim can take
// and more pages follow only while the rooms found do not fill it (hot
// rooms whose many rows fill a page, rooms held by others).
const claimScanPage = 256

// claimScanPages bounds the pages one claim reads when the rooms found are
// held by others (a room's publisher holds its newest rows): the claim
// looks further back instead of claiming nothing while free rooms wait
// behind held ones, up to 16 claims' worth of rows.
const claimScanPages = 16

// maxClaimRooms bounds the rooms one claim plans from one page.
const maxClaimRooms = 256

// ClaimPendingOutbox implements persistence.OutboxStore. Plain reads of
// idx_room_outbox_pending find the rooms of the oldest due free rows
// (oldest first: a room's wait is bounded by the rows ahead of it, never
// by its name, as when the scan ran in event_id order, nor by rows that
// keep arriving); claimRooms then leases the free and due ones.
func (s *Store) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	rows, _, err := s.ClaimPendingOutboxFrom(ctx, owner, nowMs, leaseMs, limit, persistence.OutboxScanMark{})
	return rows, err
}

// scanned is one row the claim's walk read: its place and its room.
type scanned struct {
	at   persistence.OutboxScanMark
	room persistence.RoomKey
}

// ClaimPendingOutboxFrom implements persistence.OutboxClaimResumer: the
// walk of ClaimPendingOutbox, started after from. The place returned is
// just before the first row the walk read of a room the claim did not
// look at (the plan filled before it, or the page had more rooms than a
// claim plans); the walk's last row when it looked at every room it read.
func (s *Store) ClaimPendingOutboxFrom(ctx context.Context, owner string, nowMs, leaseMs int64, limit int,
	from persistence.OutboxScanMark) ([]persistence.OutboxRow, persistence.OutboxScanMark, error) {
	var (
		afterMs  int64 = math.MinInt64
		afterID  string
		seen     = map[persistence.RoomKey]bool{}
		listed   []persistence.RoomKey // rooms handed to the plan, in walk order
		walk     []scanned
		pages    int
		finished bool
	)
	if from.Set {
		afterMs, afterID = from.CreatedAtMs, from.EventID
	}
	rows, take, err := s.claimRooms(ctx, owner, nowMs, leaseMs, limit, func(ctx context.Context, q querier) ([]persistence.RoomKey, error) {
		if finished || pages == claimScanPages {
			return nil, nil
		}
		pages++
		want := max(limit, claimScanPage)
		rs, err := q.QueryContext(ctx, "SELECT app_code, room_id, created_at_ms, event_id FROM room_outbox FORCE INDEX (idx_room_outbox_pending)"+
			" WHERE status = 'pending' AND (created_at_ms > ? OR (created_at_ms = ? AND event_id > ?))"+
			" AND next_retry_at_ms <= ? AND lock_until_ms <= ?"+
			" ORDER BY created_at_ms, event_id LIMIT ?", afterMs, afterMs, afterID, nowMs, nowMs, want)
		if err != nil {
			return nil, s.claimErr(err)
		}
		defer rs.Close()
		var rooms []persistence.RoomKey
		n := 0
		for rs.Next() {
			var k persistence.RoomKey
			if err := rs.Scan(&k.AppCode, &k.RoomID, &afterMs, &afterID); err != nil {
				return nil, s.wrap("claim outbox", err)
			}
			n++
			walk = append(walk, scanned{persistence.OutboxScanMark{CreatedAtMs: afterMs, EventID: afterID, Set: true}, k})
			if !seen[k] && len(rooms) < maxClaimRooms {
				seen[k] = true
				rooms = append(rooms, k)
			}
		}
		if err := rs.Err(); err != nil {
			return nil, s.claimErr(err)
		}
		finished = n < want
		listed = append(listed, rooms...)
		return rooms, nil
	})
	if err != nil {
		return nil, from, err
	}
	return rows, resumeAt(from, walk, listed, take, limit), nil
}

// resumeAt is where a claim that planned take (in walk order) out of the
// rooms listed from walk lets a later claim start: before the first row
// of a room it did not look at. The plan looks at rooms in order until it
// fills; when it did not fill, it looked at every room listed.
func resumeAt(from persistence.OutboxScanMark, walk []scanned, listed []persistence.RoomKey, take []roomTake, limit int) persistence.OutboxScanMark {
	planned := 0
	for _, t := range take {
		planned += t.n
	}
	looked := make(map[persistence.RoomKey]bool, len(listed))
	for _, k := range listed {
		looked[k] = true
		if planned >= limit && len(take) > 0 && k == take[len(take)-1].key {
			break
		}
	}
	at := from
	for _, w := range walk {
		if !looked[w.room] {
			return at
		}
		at = w.at
	}
	return at
}

// ClaimRoomOutbox implements persistence.OutboxStore.
func (s *Store) ClaimRoomOutbox(ctx context.Context, key persistence.RoomKey, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	done := false
	rows, _, err := s.claimRooms(ctx, owner, nowMs, leaseMs, limit, func(context.Context, querier) ([]persistence.RoomKey, error) {
		if done {
			return nil, nil
		}
		done = true
		return []persistence.RoomKey{key}, nil
	})
	return rows, err
}

// querier is a pool or a transaction.
type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

// querierExec is a pool or a transaction that also writes.
type querierExec interface {
	querier
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}

// claimRooms leases the lowest pending rows of the free and due candidate
// rooms, in candidate order, at most limit rows, in one transaction of a
// few statements whatever the number of rooms:
//
//  1. the candidate rooms, a page at a time (next returns nil when there
//     are no more), and per room its pending depth and whether a pending
//     row of it is under a live lease (index only), and for the leased
//     rooms who holds them: a room another owner holds anywhere, its newest
//     rows included (the room's publisher leases them at insert), is left
//     out; pages are read until the plan fills limit;
//  2. one locking read (FOR UPDATE, not SKIP LOCKED: skipping a locked row
//     could hand out a later row of a room before an earlier one): the
//     lowest rows of each planned room, as many as the claim can take;
//  3. one UPDATE writing the lease, then COMMIT.
//
// Step 1 reads a snapshot that may predate a lock wait in step 2, so the
// locked rows are checked again as they are now (a claim that committed
// meanwhile is seen there). Claimers walk rooms oldest first, so they
// rarely meet in opposite orders; when InnoDB still picks this claim as a
// deadlock or lock-wait victim it claims nothing this time (the next poll
// tries again). The transaction is bounded by the caller's context, by
// innodb_lock_wait_timeout and by the session's idle transaction timeout
// (roomSessionInit). It also returns the rooms it planned, in plan order.
func (s *Store) claimRooms(ctx context.Context, owner string, nowMs, leaseMs int64, limit int,
	next func(context.Context, querier) ([]persistence.RoomKey, error)) ([]persistence.OutboxRow, []roomTake, error) {
	var take []roomTake
	rows, err := s.claimTx(ctx, "claim outbox", owner, limit, func(ctx context.Context, tx *sql.Tx) ([]persistence.OutboxRow, error) {
		take = nil
		for left := limit; left > 0; {
			rooms, err := next(ctx, tx)
			if err != nil {
				return nil, err
			}
			if len(rooms) == 0 {
				break
			}
			part, err := s.claimPlan(ctx, tx, rooms, owner, nowMs, left)
			if err != nil {
				return nil, err
			}
			for _, t := range part {
				left -= t.n
			}
			take = append(take, part...)
		}
		if len(take) == 0 {
			return nil, nil
		}
		out, err := s.lockRooms(ctx, tx, take, owner, nowMs)
		if isDeadlock(err) {
			return nil, nil
		}
		if err != nil || len(out) == 0 {
			return nil, err
		}
		if err := s.writeLeases(ctx, tx, out, owner, nowMs+leaseMs); err != nil {
			if isDeadlock(err) {
				return nil, nil
			}
			return nil, err
		}
		return out, nil
	})
	return rows, take, err
}

// claimTx runs one claim of at most limit rows for owner in its own
// transaction: the checks every claim makes first, then claim, then COMMIT
// when claim returned rows (with none, or an error, it rolls back). op
// names the claim in errors.
func (s *Store) claimTx(ctx context.Context, op, owner string, limit int,
	claim func(context.Context, *sql.Tx) ([]persistence.OutboxRow, error)) ([]persistence.OutboxRow, error) {
	if err := ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	if err := checkLen("owner", owner, maxLockedBy, true); err != nil {
		return nil, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	// READ COMMITTED: a claim that waited for another's row locks then
	// reads the room leases that claim committed (a snapshot from before
	// the wait would not show them), and takes no gap locks.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer func() { _ = tx.Rollback() }()
	out, err := claim(ctx, tx)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, s.wrap(op+": commit", err)
	}
	return out, nil
}

// roomTake is one room of a claim and how many of its rows to lock.
type roomTake struct {
	key persistence.RoomKey
	n   int
}

// roomArgs renders keys as "(?,?),(?,?)…" with their arguments appended
// to args.
func roomArgs(keys []persistence.RoomKey, args []any) (string, []any) {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?)")
		args = append(args, k.AppCode, k.RoomID)
	}
	return b.String(), args
}

// claimPlan is step 1 of claimRooms: the rooms to lock, in candidate
// order, each with the rows it can still give, leaving out rooms another
// owner holds; at most limit rows in all. Rooms are asked about a chunk at
// a time (16, then 4× more each round), so a claim that the first rooms
// fill reads nothing of the rest.
func (s *Store) claimPlan(ctx context.Context, tx *sql.Tx, rooms []persistence.RoomKey, owner string, nowMs int64, limit int) ([]roomTake, error) {
	var take []roomTake
	left, chunk := limit, 16
	for len(rooms) > 0 && left > 0 {
		n := min(chunk, len(rooms))
		part, err := s.planRooms(ctx, tx, rooms[:n], owner, nowMs, left)
		if err != nil {
			return nil, err
		}
		for _, t := range part {
			left -= t.n
		}
		take = append(take, part...)
		rooms, chunk = rooms[n:], chunk*4
	}
	return take, nil
}

// planRooms plans one chunk of claimPlan's rooms.
func (s *Store) planRooms(ctx context.Context, tx *sql.Tx, rooms []persistence.RoomKey, owner string, nowMs int64, limit int) ([]roomTake, error) {
	// Per room: its pending depth, whether a row of it is under a live
	// lease of its own, and whether another owner's live room lease holds
	// a row of it (one not given back, at or below the lease's last row).
	// The lease check runs once per room (after the grouping), and its
	// row probe only for a room another owner's live lease names.
	in, args := roomArgs(rooms, []any{nowMs, owner, nowMs})
	rs, err := tx.QueryContext(ctx, "SELECT d.app_code, d.room_id, d.n, d.live,"+
		" COALESCE(l.lock_until_ms > ? AND l.locked_by <> ? AND EXISTS (SELECT 1 FROM room_outbox o FORCE INDEX (idx_room_outbox_room)"+
		" WHERE o.app_code = d.app_code AND o.room_id = d.room_id AND o.status = 'pending' AND o.lock_until_ms >= 0"+
		" AND (o.room_seq < l.upto_seq OR (o.room_seq = l.upto_seq AND o.event_index <= l.upto_index))), 0)"+
		" FROM (SELECT app_code, room_id, COUNT(*) AS n, SUM(lock_until_ms > ?) AS live FROM room_outbox FORCE INDEX (idx_room_outbox_room)"+
		" WHERE status = 'pending' AND (app_code, room_id) IN ("+in+") GROUP BY app_code, room_id) d"+
		" LEFT JOIN room_outbox_leases l ON l.app_code = d.app_code AND l.room_id = d.room_id", args...)
	if err != nil {
		return nil, s.claimErr(err)
	}
	depth := make(map[persistence.RoomKey]int, len(rooms))
	held := map[persistence.RoomKey]bool{}
	var leased []persistence.RoomKey
	for rs.Next() {
		var (
			k             persistence.RoomKey
			n, live, room int
		)
		if err := rs.Scan(&k.AppCode, &k.RoomID, &n, &live, &room); err != nil {
			rs.Close()
			return nil, s.wrap("claim outbox", err)
		}
		depth[k] = n
		if live > 0 {
			leased = append(leased, k)
		}
		if room > 0 {
			held[k] = true
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, s.claimErr(err)
	}
	if len(leased) > 0 {
		in, args := roomArgs(leased, []any{nowMs, owner})
		rs, err := tx.QueryContext(ctx, "SELECT DISTINCT app_code, room_id FROM room_outbox FORCE INDEX (idx_room_outbox_room)"+
			" WHERE status = 'pending' AND lock_until_ms > ? AND locked_by <> ? AND (app_code, room_id) IN ("+in+")", args...)
		if err != nil {
			return nil, s.claimErr(err)
		}
		for rs.Next() {
			var k persistence.RoomKey
			if err := rs.Scan(&k.AppCode, &k.RoomID); err != nil {
				rs.Close()
				return nil, s.wrap("claim outbox", err)
			}
			held[k] = true
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, s.claimErr(err)
		}
	}
	var take []roomTake
	left := limit
	for _, k := range rooms {
		if left <= 0 {
			break
		}
		if n := depth[k]; n > 0 && !held[k] {
			take = append(take, roomTake{k, min(n, left)})
			left -= min(n, left)
		}
	}
	return take, nil
}

// claimErr: a lock-wait or deadlock victim claims nothing this time.
func (s *Store) claimErr(err error) error {
	if isDeadlock(err) {
		return nil
	}
	return s.wrap("claim outbox", err)
}

// lockRooms is step 2 of claimRooms: one locking read of each planned
// room's lowest pending rows (a UNION ALL of one part per room), then the
// rooms whose rows are free and due, in plan order, each in room_seq
// order.
func (s *Store) lockRooms(ctx context.Context, tx *sql.Tx, take []roomTake, owner string, nowMs int64) ([]persistence.OutboxRow, error) {
	var (
		q    strings.Builder
		args []any
	)
	for i, t := range take {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString("(SELECT " + outboxColumns + " FROM room_outbox FORCE INDEX (idx_room_outbox_room)" +
			" WHERE app_code = ? AND room_id = ? AND status = 'pending' ORDER BY room_seq, event_index LIMIT ? FOR UPDATE)")
		args = append(args, t.key.AppCode, t.key.RoomID, t.n)
	}
	rows, err := s.queryOutbox(ctx, tx, "claim outbox", q.String(), args...)
	if err != nil {
		return nil, err
	}
	// With the rooms' lowest rows locked, no other claim of these rooms
	// is under way; their leases as committed decide.
	keys := make([]persistence.RoomKey, len(take))
	for i, t := range take {
		keys[i] = t.key
	}
	want := make(map[persistence.RoomKey]int, len(take))
	for _, t := range take {
		want[t.key] = t.n
	}
	leases, err := s.roomLeases(ctx, tx, keys)
	if err != nil {
		return nil, s.claimErr(err)
	}
	beyond, err := s.heldBeyond(ctx, tx, rows, take, leases, owner, nowMs)
	if err != nil {
		return nil, s.claimErr(err)
	}
	return takeFree(rows, take, func(rs []persistence.OutboxRow) bool {
		if len(rs) == 0 || rs[0].NextRetryAtMs > nowMs {
			return false
		}
		k := persistence.RoomKey{AppCode: rs[0].Envelope.AppCode, RoomID: rs[0].Envelope.RoomID}
		if l, ok := leases[k]; ok && l.heldByOther(owner, nowMs, rs, len(rs) < want[k] || !beyond[k]) {
			return false
		}
		return !slices.ContainsFunc(rs, func(r persistence.OutboxRow) bool {
			return r.LockUntilMs > nowMs && r.LockedBy != owner
		})
	}), nil
}

// takeFree groups the locked rows by room and returns, in plan order, the
// rows of each planned room that free says may be leased, each room's in
// room_seq order.
func takeFree(rows []persistence.OutboxRow, take []roomTake, free func(rs []persistence.OutboxRow) bool) []persistence.OutboxRow {
	byRoom := make(map[persistence.RoomKey][]persistence.OutboxRow, len(take))
	for _, r := range rows {
		k := persistence.RoomKey{AppCode: r.Envelope.AppCode, RoomID: r.Envelope.RoomID}
		byRoom[k] = append(byRoom[k], r)
	}
	var out []persistence.OutboxRow
	for _, t := range take {
		rs := byRoom[t.key]
		slices.SortFunc(rs, persistence.CompareRoomOrder)
		if free(rs) {
			out = append(out, rs...)
		}
	}
	return out
}

// updateOutbox runs a single-row UPDATE guarded by status = 'pending'. No
// row changed means the event is unknown (ErrNotFound) or already
// published (a no-op).
func (s *Store) updateOutbox(ctx context.Context, op, eventID, set string, args ...any) error {
	if err := ready(ctx); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	// A claim of the row's room locks its rows on the status index, so
	// InnoDB may pick this statement as a deadlock victim; a victim's
	// statement was rolled back whole, so running it again is safe.
	var res sql.Result
	err := retryDeadlock(ctx, func() (err error) {
		res, err = s.db.ExecContext(ctx, "UPDATE room_outbox SET "+set+" WHERE event_id = ? AND status = 'pending'", append(args, eventID)...)
		return err
	})
	if err != nil {
		return s.wrap(op+" "+eventID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		return nil
	}
	var one int
	err = s.db.QueryRowContext(ctx, "SELECT 1 FROM room_outbox WHERE event_id = ?", eventID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("mysql: %s: outbox event %q: %w", op, eventID, persistence.ErrNotFound)
	}
	if err != nil {
		return s.wrap(op+" "+eventID, err)
	}
	return nil
}

// publishedMark is the published mark's SET: every column it writes keeps
// its length (status is CHAR(9), published_at_ms NOT NULL, last_error is
// NULL already unless the row failed before), so InnoDB updates the record
// in place instead of rewriting it with its envelope. It leaves locked_by
// as it was (a publisher's insert lease): readers show no lease on a row
// that is not pending (scanOutbox), and claims read only pending rows.
const publishedMark = "status = 'published', last_error = NULL, published_at_ms = ?, updated_at_ms = ?, lock_until_ms = 0"

// MarkOutboxPublished implements persistence.OutboxStore.
func (s *Store) MarkOutboxPublished(ctx context.Context, eventID string, nowMs int64) error {
	return s.updateOutbox(ctx, "mark published", eventID, publishedMark, nowMs, nowMs)
}

// MarkOutboxPublishedBatch implements persistence.OutboxStore: one UPDATE
// per chunk of ids instead of one per row. With group commit on, the
// UPDATE rides the next shared transaction of appends (groupcommit.go)
// instead of a commit of its own; it returns once that committed.
func (s *Store) MarkOutboxPublishedBatch(ctx context.Context, eventIDs []string, nowMs int64) error {
	if s.gc == nil || len(eventIDs) == 0 {
		return s.updatePending(ctx, "mark published batch", "room_outbox", "status", eventIDs, publishedMark, nowMs, nowMs)
	}
	if err := ready(ctx); err != nil {
		return err
	}
	return s.gc.mark(ctx, &queuedMark{ids: eventIDs, nowMs: nowMs})
}

// releaseSet is a release's SET: the row leaves its sender's lease
// (lock_until_ms released) and keeps locked_by, so InnoDB updates the
// record in place (setting locked_by NULL shrank it, and the whole record
// was rewritten); readers show no lease on a released row (shownLease),
// and claims look at lock_until_ms only.
const releaseSet = "lock_until_ms = " + released

// op names q's store call in errors.
func (q *queuedMark) op() string {
	if q.release {
		return "release batch"
	}
	return "mark published batch"
}

// sql is q's SET and its arguments.
func (q *queuedMark) sql() (string, []any) {
	if q.release {
		return releaseSet, nil
	}
	return publishedMark, []any{q.nowMs, q.nowMs}
}

// markStatements are the UPDATEs of queued marks and releases in a shared
// transaction: those of one kind and time together, markChunk ids a
// statement, ids in order (the order InnoDB locks them in anyway).
func markStatements(marks []*queuedMark) []statement {
	type group struct {
		release bool
		nowMs   int64
	}
	byGroup := map[group][]string{}
	var groups []group
	for _, m := range marks {
		g := group{m.release, m.nowMs}
		if m.release {
			g.nowMs = 0
		}
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], m.ids...)
	}
	var out []statement
	for _, g := range groups {
		ids := byGroup[g]
		slices.Sort(ids)
		set, setArgs := (&queuedMark{release: g.release, nowMs: g.nowMs}).sql()
		for chunk := range slices.Chunk(slices.Compact(ids), markChunk) {
			args := slices.Clone(setArgs)
			for _, id := range chunk {
				args = append(args, id)
			}
			out = append(out, statement{query: "UPDATE room_outbox SET " + set +
				" WHERE status = 'pending' AND event_id IN (?" + strings.Repeat(",?", len(chunk)-1) + ")", args: args})
		}
	}
	return out
}

// writeMarks writes each queued mark or release on its own (no appends to
// ride with, or their shared transaction failed) and sets its result.
func (s *Store) writeMarks(ctx context.Context, marks []*queuedMark) {
	for _, m := range marks {
		set, args := m.sql()
		m.err = s.updatePending(ctx, m.op(), "room_outbox", "status", m.ids, set, args...)
	}
}

// ReleaseOutboxBatch implements persistence.OutboxStore, one UPDATE per
// chunk like MarkOutboxPublishedBatch, and like it riding the group
// commit's next shared transaction when that is on.
func (s *Store) ReleaseOutboxBatch(ctx context.Context, eventIDs []string) error {
	if s.gc == nil || len(eventIDs) == 0 {
		return s.updatePending(ctx, "release batch", "room_outbox", "status", eventIDs, releaseSet)
	}
	if err := ready(ctx); err != nil {
		return err
	}
	return s.gc.mark(ctx, &queuedMark{release: true, ids: eventIDs})
}

// markChunk is the most ids one mark or release statement names.
const markChunk = 2000

// updatePending applies set (with setArgs) to the rows of table among
// eventIDs whose status column (room_outbox's status for IM,
// room_outbox_mq's mq_status for MQ) is 'pending',
// 2,000 ids (hot_room_batch's default, a grown claim) a statement: each
// statement is a commit; other rows and unknown ids are skipped.
func (s *Store) updatePending(ctx context.Context, op, table, status string, eventIDs []string, set string, setArgs ...any) error {
	if err := ready(ctx); err != nil {
		return err
	}
	for ids := range slices.Chunk(eventIDs, markChunk) {
		args := slices.Clone(setArgs)
		for _, id := range ids {
			args = append(args, id)
		}
		// Marks, releases and claims of one room's rows meet on the
		// status indexes, so InnoDB may pick this statement as a deadlock
		// victim; it changes only rows still pending, so running it again
		// is safe, and cheaper than carrying the ids to the next poll.
		err := retryDeadlock(ctx, func() error {
			cctx, cancel := s.opCtx(ctx)
			defer cancel()
			_, err := s.db.ExecContext(cctx, "UPDATE "+table+" SET "+set+
				" WHERE "+status+" = 'pending' AND event_id IN (?"+strings.Repeat(",?", len(ids)-1)+")", args...)
			return err
		})
		if err != nil {
			return s.wrap(op, err)
		}
	}
	return nil
}

// MarkOutboxFailed implements persistence.OutboxStore. lastError is cut to
// the column's 1024 characters.
func (s *Store) MarkOutboxFailed(ctx context.Context, eventID, lastError string, nowMs, nextRetryAtMs int64) error {
	// The row leaves its room's lease (due again at nextRetryAtMs, whoever
	// claims it); the room's other rows stay with their sender.
	return s.updateOutbox(ctx, "mark failed", eventID,
		"retry_count = retry_count + 1, last_error = ?, updated_at_ms = ?, next_retry_at_ms = ?, locked_by = NULL, lock_until_ms = "+released,
		truncateChars(lastError, maxLastError), nowMs, nextRetryAtMs)
}

// ParkOutbox implements persistence.OutboxStore.
func (s *Store) ParkOutbox(ctx context.Context, eventID, lastError string, nowMs int64) error {
	return s.updateOutbox(ctx, "park", eventID,
		"status = 'parked', retry_count = retry_count + 1, last_error = ?, updated_at_ms = ?, locked_by = NULL, lock_until_ms = 0",
		truncateChars(lastError, maxLastError), nowMs)
}

// RequeueOutbox implements persistence.OutboxStore.
func (s *Store) RequeueOutbox(ctx context.Context, eventID string, nowMs int64) error {
	return s.resolveOutbox(ctx, "requeue", eventID, []string{persistence.OutboxParked, persistence.OutboxPending},
		requeueLease+", status = 'pending', next_retry_at_ms = ?, updated_at_ms = ?", nowMs, nowMs)
}

// SkipOutbox implements persistence.OutboxStore.
func (s *Store) SkipOutbox(ctx context.Context, eventID, by, reason string, nowMs int64) error {
	if err := checkLen("skipped by", by, maxLockedBy, false); err != nil {
		return err
	}
	return s.resolveOutbox(ctx, "skip", eventID, []string{persistence.OutboxParked, persistence.OutboxPending, persistence.OutboxSkipped},
		"status = 'skipped', resolved_by = ?, resolved_at_ms = ?, resolution = ?, updated_at_ms = ?, locked_by = NULL, lock_until_ms = 0",
		by, nowMs, truncateChars(reason, maxLastError), nowMs)
}

// resolveOutbox is an operator's change of one row whose status is one of
// from; any other status is ErrConflict. A skipped row stays as it was
// recorded (skipping it again changes nothing).
func (s *Store) resolveOutbox(ctx context.Context, op, eventID string, from []string, set string, args ...any) error {
	if err := ready(ctx); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var status string
	err := s.db.QueryRowContext(ctx, "SELECT status FROM room_outbox WHERE event_id = ?", eventID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("mysql: %s: outbox event %q: %w", op, eventID, persistence.ErrNotFound)
	}
	if err != nil {
		return s.wrap(op+" "+eventID, err)
	}
	if !slices.Contains(from, status) {
		return fmt.Errorf("mysql: %s %s: row is %s: %w", op, eventID, status, persistence.ErrConflict)
	}
	if status == persistence.OutboxSkipped {
		return nil
	}
	// The status guard makes a race with a relay's mark harmless: the
	// UPDATE then changes nothing.
	res, err := s.db.ExecContext(ctx, "UPDATE room_outbox SET "+set+" WHERE event_id = ? AND status = ?", append(args, eventID, status)...)
	if err != nil {
		return s.wrap(op+" "+eventID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("mysql: %s %s: row changed meanwhile: %w", op, eventID, persistence.ErrConflict)
	}
	return nil
}

// MarkOutboxEffectsDone implements persistence.OutboxStore: one UPDATE
// by primary key, whatever the row's status.
func (s *Store) MarkOutboxEffectsDone(ctx context.Context, eventID string, steps uint32) error {
	if err := ready(ctx); err != nil {
		return err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	res, err := s.db.ExecContext(ctx, "UPDATE room_outbox SET effects_done = effects_done | ? WHERE event_id = ?", steps, eventID)
	if err != nil {
		return s.wrap("mark effects done "+eventID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		return nil
	}
	// No row changed: unknown, or the steps were there already.
	var one int
	err = s.db.QueryRowContext(ctx, "SELECT 1 FROM room_outbox WHERE event_id = ?", eventID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("mysql: mark effects done: outbox event %q: %w", eventID, persistence.ErrNotFound)
	}
	if err != nil {
		return s.wrap("mark effects done "+eventID, err)
	}
	return nil
}

// ReleaseOutbox implements persistence.OutboxStore.
func (s *Store) ReleaseOutbox(ctx context.Context, eventID string) error {
	return s.updateOutbox(ctx, "release", eventID, releaseSet)
}

func truncateChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// GetOutbox implements persistence.OutboxStore.
func (s *Store) GetOutbox(ctx context.Context, eventID string) (persistence.OutboxRow, error) {
	if err := ready(ctx); err != nil {
		return persistence.OutboxRow{}, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	r, err := scanOutbox(s.db.QueryRowContext(ctx, "SELECT "+outboxColumns+" FROM room_outbox WHERE event_id = ?", eventID))
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.OutboxRow{}, fmt.Errorf("mysql: outbox event %q: %w", eventID, persistence.ErrNotFound)
	}
	if err != nil {
		return persistence.OutboxRow{}, s.wrap("get outbox "+eventID, err)
	}
	rows, err := s.shownRows(ctx, "get outbox "+eventID, []persistence.OutboxRow{r})
	if err != nil {
		return persistence.OutboxRow{}, err
	}
	return rows[0], nil
}

// ListOutbox implements persistence.OutboxStore. Limit <= 0 means no
// limit. It sorts the rows of the status (idx_room_outbox_pending) or the
// whole table in listOrder: an operator query, not a hot path.
func (s *Store) ListOutbox(ctx context.Context, f persistence.OutboxFilter) ([]persistence.OutboxRow, error) {
	if err := ready(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	q := "SELECT " + outboxColumns + " FROM room_outbox"
	var args []any
	if f.Status != "" {
		q += " WHERE status = ?"
		args = append(args, f.Status)
	}
	q += " ORDER BY " + listOrder
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.queryOutbox(ctx, s.db, "list outbox", q, args...)
	if err != nil {
		return nil, err
	}
	return s.shownRows(ctx, "list outbox", rows)
}

// OutboxStats implements persistence.OutboxStore. Both aggregates read
// only idx_room_outbox_pending: MIN is one index dive, COUNT walks the
// pending entries (the backlog, not the table).
func (s *Store) OutboxStats(ctx context.Context) (persistence.OutboxStats, error) {
	if err := ready(ctx); err != nil {
		return persistence.OutboxStats{}, err
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	var st persistence.OutboxStats
	err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*), COALESCE(MIN(created_at_ms), 0) FROM room_outbox WHERE status = 'pending'").
		Scan(&st.Pending, &st.OldestCreatedAtMs)
	if err == nil {
		err = s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM room_outbox WHERE status = 'parked'").Scan(&st.Parked)
	}
	if err == nil {
		err = s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM room_outbox_mq WHERE mq_status = 'pending'").Scan(&st.MQPending)
	}
	if err != nil {
		return persistence.OutboxStats{}, s.wrap("outbox stats", err)
	}
	return st, nil
}
