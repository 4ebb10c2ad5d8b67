package mysql

import (
	"context"
	"database/sql"
	"math"
	"slices"
	"strings"

	"github.com/hyapp/roomcell/persistence"
)

// The MQ fanout's side of room_outbox (persistence.OutboxMQStore): its own
// table room_outbox_mq (mq_status, mq_published_at_ms, mq_locked_by,
// mq_lock_until_ms, and the row's place: room, room_seq, event_index,
// created_at_ms) with its indexes idx_room_outbox_mq and
// idx_room_outbox_room_mq, one row per outbox row written while the fanout
// was on (migration 016). Nothing here writes room_outbox or locks its
// rows: the IM relay's claims and marks never wait for the fanout's.

// mqColumns are the room_outbox_mq columns readMQ reads.
const mqColumns = "event_id, mq_status, mq_published_at_ms, mq_locked_by, mq_lock_until_ms"

// mqState is a room_outbox_mq row's progress.
type mqState struct {
	status    string
	published int64
	lockedBy  string
	lockUntil int64
}

// readMQ reads the room_outbox_mq rows of ids matching cond (SQL after
// the id list: "", or a status guard and FOR UPDATE), by event id.
func (s *Store) readMQ(ctx context.Context, q querier, ids []any, cond string) (map[string]mqState, error) {
	out := make(map[string]mqState, len(ids))
	for part := range slices.Chunk(ids, markChunk) {
		rs, err := q.QueryContext(ctx, "SELECT "+mqColumns+" FROM room_outbox_mq WHERE event_id IN ("+placeholders(len(part))+")"+cond, part...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var (
				id string
				m  mqState
				by sql.NullString
			)
			if err := rs.Scan(&id, &m.status, &m.published, &by, &m.lockUntil); err != nil {
				rs.Close()
				return nil, err
			}
			m.lockedBy = by.String
			out[id] = m
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setMQ shows m in r; a row the fanout never had (no room_outbox_mq row)
// is OutboxMQNone. A mark leaves mq_locked_by as it was: an MQ lease means
// something only on an MQ-pending row.
func setMQ(r *persistence.OutboxRow, m mqState, ok bool) {
	if !ok {
		r.MQStatus, r.MQPublishedAtMs, r.MQLockedBy, r.MQLockUntilMs = persistence.OutboxMQNone, 0, "", 0
		return
	}
	r.MQStatus, r.MQPublishedAtMs, r.MQLockedBy, r.MQLockUntilMs = m.status, m.published, "", 0
	if m.status == persistence.OutboxMQPending {
		r.MQLockedBy, r.MQLockUntilMs = m.lockedBy, m.lockUntil
	}
}

// withMQ fills the MQ fields of rows from room_outbox_mq.
func (s *Store) withMQ(ctx context.Context, op string, rows []persistence.OutboxRow) ([]persistence.OutboxRow, error) {
	if len(rows) == 0 {
		return rows, nil
	}
	ids := make([]any, len(rows))
	for i, r := range rows {
		ids[i] = r.Envelope.EventID
	}
	mq, err := s.readMQ(ctx, s.db, ids, "")
	if err != nil {
		return nil, s.wrap(op, err)
	}
	for i := range rows {
		m, ok := mq[rows[i].Envelope.EventID]
		setMQ(&rows[i], m, ok)
	}
	return rows, nil
}

// shownRows is how the operators' and seed 000's reads show rows: with
// their room's lease and their MQ progress.
func (s *Store) shownRows(ctx context.Context, op string, rows []persistence.OutboxRow) ([]persistence.OutboxRow, error) {
	rows, err := s.withRoomLeases(ctx, op, rows)
	if err != nil {
		return nil, err
	}
	return s.withMQ(ctx, op, rows)
}

// ClaimOutboxMQ implements persistence.OutboxMQStore room by room, in one
// transaction of a few statements, as claimRooms does for the IM relay:
//
//  1. plain reads of room_outbox_mq's idx_room_outbox_mq find the rooms of
//     the oldest free MQ-pending rows, a page at a time; per chunk of
//     them, one read of idx_room_outbox_room_mq (index only) gives each room's MQ-pending
//     depth and whether one of its rows is under a live MQ lease; leased
//     rooms are left out; pages are read until the plan fills limit;
//  2. a plain read of each planned room's lowest MQ-pending event ids,
//     then one locking read of those rows (FOR UPDATE, not SKIP LOCKED:
//     skipping a locked row could hand out a room's later row before an
//     earlier one), checked again as they are now (a claim that committed
//     after step 1's reads is seen), and a plain read of their
//     room_outbox rows (the envelopes);
//  3. one UPDATE of room_outbox_mq writing the lease, then COMMIT.
//
// A deadlock or lock-wait victim claims nothing this time (the next round
// tries again).
func (s *Store) ClaimOutboxMQ(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	return s.claimTx(ctx, "claim outbox mq", owner, limit, func(ctx context.Context, tx *sql.Tx) ([]persistence.OutboxRow, error) {
		var (
			take    []roomTake
			afterMs int64 = math.MinInt64
			afterID string
			seen    = map[persistence.RoomKey]bool{}
		)
		for page, left := 0, limit; page < claimScanPages && left > 0; page++ {
			rooms, more, err := s.mqRoomsPage(ctx, tx, nowMs, max(limit, claimScanPage), &afterMs, &afterID, seen)
			if err != nil {
				return mqClaimFailed(err)
			}
			for chunk := 16; len(rooms) > 0 && left > 0; chunk *= 4 {
				n := min(chunk, len(rooms))
				part, err := s.planRoomsMQ(ctx, tx, rooms[:n], nowMs, left)
				if err != nil {
					return mqClaimFailed(err)
				}
				for _, t := range part {
					left -= t.n
				}
				take = append(take, part...)
				rooms = rooms[n:]
			}
			if !more {
				break
			}
		}
		if len(take) == 0 {
			return nil, nil
		}
		out, err := s.lockRoomsMQ(ctx, tx, take, nowMs)
		if err != nil || len(out) == 0 {
			return mqClaimFailed(err)
		}
		until := nowMs + leaseMs
		args := make([]any, 0, len(out)+2)
		args = append(args, owner, until)
		for i := range out {
			out[i].MQLockedBy, out[i].MQLockUntilMs = owner, until
			args = append(args, out[i].Envelope.EventID)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE room_outbox_mq SET mq_locked_by = ?, mq_lock_until_ms = ?"+
			" WHERE event_id IN ("+placeholders(len(out))+")", args...); err != nil {
			return mqClaimFailed(s.wrap("claim outbox mq", err))
		}
		return out, nil
	})
}

// mqRoomsPage reads one page of the oldest free MQ-pending rows after
// (*afterMs, *afterID) and returns the rooms not seen before, in order,
// and whether the page was full (more may follow).
func (s *Store) mqRoomsPage(ctx context.Context, tx *sql.Tx, nowMs int64, want int, afterMs *int64, afterID *string,
	seen map[persistence.RoomKey]bool) ([]persistence.RoomKey, bool, error) {
	rs, err := tx.QueryContext(ctx, "SELECT app_code, room_id, created_at_ms, event_id FROM room_outbox_mq FORCE INDEX (idx_room_outbox_mq)"+
		" WHERE mq_status = 'pending' AND (created_at_ms > ? OR (created_at_ms = ? AND event_id > ?)) AND mq_lock_until_ms <= ?"+
		" ORDER BY created_at_ms, event_id LIMIT ?", *afterMs, *afterMs, *afterID, nowMs, want)
	if err != nil {
		return nil, false, s.wrap("claim outbox mq", err)
	}
	defer rs.Close()
	var rooms []persistence.RoomKey
	n := 0
	for rs.Next() {
		var k persistence.RoomKey
		if err := rs.Scan(&k.AppCode, &k.RoomID, afterMs, afterID); err != nil {
			return nil, false, s.wrap("claim outbox mq", err)
		}
		n++
		if !seen[k] && len(rooms) < maxClaimRooms {
			seen[k] = true
			rooms = append(rooms, k)
		}
	}
	if err := rs.Err(); err != nil {
		return nil, false, s.wrap("claim outbox mq", err)
	}
	return rooms, n == want, nil
}

// planRoomsMQ is step 1's per-room read: the rooms, in the given order,
// with none of their MQ-pending rows under a live lease, each with the
// rows it can give, at most limit in all.
func (s *Store) planRoomsMQ(ctx context.Context, tx *sql.Tx, rooms []persistence.RoomKey, nowMs int64, limit int) ([]roomTake, error) {
	in, args := roomArgs(rooms, []any{nowMs})
	rs, err := tx.QueryContext(ctx, "SELECT app_code, room_id, COUNT(*), SUM(mq_lock_until_ms > ?) FROM room_outbox_mq FORCE INDEX (idx_room_outbox_room_mq)"+
		" WHERE mq_status = 'pending' AND (app_code, room_id) IN ("+in+") GROUP BY app_code, room_id", args...)
	if err != nil {
		return nil, s.wrap("claim outbox mq", err)
	}
	defer rs.Close()
	free := make(map[persistence.RoomKey]int, len(rooms))
	for rs.Next() {
		var (
			k       persistence.RoomKey
			n, live int
		)
		if err := rs.Scan(&k.AppCode, &k.RoomID, &n, &live); err != nil {
			return nil, s.wrap("claim outbox mq", err)
		}
		if live == 0 {
			free[k] = n
		}
	}
	if err := rs.Err(); err != nil {
		return nil, s.wrap("claim outbox mq", err)
	}
	var take []roomTake
	for _, k := range rooms {
		if limit <= 0 {
			break
		}
		if n := free[k]; n > 0 {
			take = append(take, roomTake{k, min(n, limit)})
			limit -= min(n, limit)
		}
	}
	return take, nil
}

// lockRoomsMQ is step 2: a plain read of each planned room's lowest
// MQ-pending event ids (index only, a UNION ALL of one part per room),
// then one locking read of those room_outbox_mq rows by primary key and a
// plain read of their room_outbox rows, then the rooms none
// of whose rows is under a live MQ lease now, in plan order, each in
// room_seq order. The rows are locked by primary key, in its order, as
// MarkOutboxMQPublished and ReleaseOutboxMQ lock them: a locking read in
// room_seq order met a concurrent mark of the same room in the opposite
// order and one of them died in a deadlock. A row published or parked
// between the two reads is left out (the rest are still the room's
// lowest: rows only leave MQ-pending, and new ones come after); a claim
// that committed in between is seen by its lease.
func (s *Store) lockRoomsMQ(ctx context.Context, tx *sql.Tx, take []roomTake, nowMs int64) ([]persistence.OutboxRow, error) {
	var (
		q    strings.Builder
		args []any
	)
	for i, t := range take {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString("(SELECT event_id FROM room_outbox_mq FORCE INDEX (idx_room_outbox_room_mq)" +
			" WHERE app_code = ? AND room_id = ? AND mq_status = 'pending' ORDER BY room_seq, event_index LIMIT ?)")
		args = append(args, t.key.AppCode, t.key.RoomID, t.n)
	}
	rs, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, s.wrap("claim outbox mq", err)
	}
	var ids []any
	for rs.Next() {
		var id string
		if err := rs.Scan(&id); err != nil {
			rs.Close()
			return nil, s.wrap("claim outbox mq", err)
		}
		ids = append(ids, id)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, s.wrap("claim outbox mq", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	mq, err := s.readMQ(ctx, tx, ids, " AND mq_status = 'pending' ORDER BY event_id FOR UPDATE")
	if err != nil {
		return nil, s.wrap("claim outbox mq", err)
	}
	if len(mq) == 0 {
		return nil, nil
	}
	locked := make([]any, 0, len(mq))
	for _, id := range ids {
		if _, ok := mq[id.(string)]; ok {
			locked = append(locked, id)
		}
	}
	rows, err := s.queryOutbox(ctx, tx, "claim outbox mq", "SELECT "+outboxColumns+" FROM room_outbox WHERE event_id IN ("+placeholders(len(locked))+")", locked...)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		m, ok := mq[rows[i].Envelope.EventID]
		setMQ(&rows[i], m, ok)
	}
	shownLease(rows)
	return takeFree(rows, take, func(rs []persistence.OutboxRow) bool {
		return !slices.ContainsFunc(rs, func(r persistence.OutboxRow) bool { return r.MQLockUntilMs > nowMs })
	}), nil
}

// mqClaimFailed: a deadlock or lock-wait victim claims nothing this time
// (InnoDB may have rolled the transaction back: nothing more is run in it).
func mqClaimFailed(err error) ([]persistence.OutboxRow, error) {
	if isDeadlock(err) {
		return nil, nil
	}
	return nil, err
}

// MarkOutboxMQPublished implements persistence.OutboxMQStore. Like the
// IM mark (publishedMark) it updates the row in place: mq_locked_by stays
// as it was, and readers show no MQ lease on a row not MQ-pending.
func (s *Store) MarkOutboxMQPublished(ctx context.Context, eventIDs []string, nowMs int64) error {
	return s.updatePending(ctx, "mark outbox mq published", "room_outbox_mq", "mq_status", eventIDs,
		"mq_status = 'published', mq_published_at_ms = ?, mq_lock_until_ms = 0", nowMs)
}

// ReleaseOutboxMQ implements persistence.OutboxMQStore.
func (s *Store) ReleaseOutboxMQ(ctx context.Context, eventIDs []string) error {
	return s.updatePending(ctx, "release outbox mq", "room_outbox_mq", "mq_status", eventIDs, "mq_locked_by = NULL, mq_lock_until_ms = 0")
}

// ParkOutboxMQ implements persistence.OutboxMQStore.
func (s *Store) ParkOutboxMQ(ctx context.Context, eventID string) error {
	if _, err := s.GetOutbox(ctx, eventID); err != nil {
		return err
	}
	return s.updatePending(ctx, "park outbox mq", "room_outbox_mq", "mq_status", []string{eventID}, "mq_status = 'parked', mq_locked_by = NULL, mq_lock_until_ms = 0")
}
