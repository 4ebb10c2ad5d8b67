package mysql

import (
	"context"
	"slices"
	"strings"

	"github.com/hyapp/roomcell/persistence"
)

// released is the lock_until_ms of a pending row its sender gave back
// (a failure, a release) or an operator requeued from parked: the row
// is no longer held by its room's lease, whose other rows stay held. A
// claim of the row clears it (0). Readers show it as no lease.
const released = "-1"

// requeueLease is the requeue's lease change, before status changes in
// the same SET (assignments apply left to right): a parked row leaves its
// room's lease, a pending row keeps its sender's.
const requeueLease = "locked_by = IF(status = 'parked', NULL, locked_by), lock_until_ms = IF(status = 'parked', " + released + ", lock_until_ms)"

// roomLease is a room_outbox_leases row: owner holds the room's pending
// rows up to (uptoSeq, uptoIndex) until until.
type roomLease struct {
	owner     string
	until     int64
	uptoSeq   int64
	uptoIndex int
}

// covers: the lease holds r (if r is pending and not given back).
func (l roomLease) covers(r persistence.OutboxRow) bool {
	return r.LockUntilMs >= 0 && (r.Envelope.RoomSeq < l.uptoSeq || r.Envelope.RoomSeq == l.uptoSeq && r.EventIndex <= l.uptoIndex)
}

// heldByOther: the lease keeps owner away from a room whose lowest
// pending rows are rs (in order; all says the lease holds no pending row
// after them): one of them is held, or all are given back and the lease
// may hold later ones (then the room waits).
func (l roomLease) heldByOther(owner string, nowMs int64, rs []persistence.OutboxRow, all bool) bool {
	if l.until <= nowMs || l.owner == owner {
		return false
	}
	if slices.ContainsFunc(rs, l.covers) {
		return true
	}
	last := rs[len(rs)-1]
	return !all && (last.Envelope.RoomSeq < l.uptoSeq || last.Envelope.RoomSeq == l.uptoSeq && last.EventIndex < l.uptoIndex)
}

// heldBeyond reads, for each room whose locked rows (all of its take)
// another owner's live lease reaches past without holding any of them,
// whether that lease still holds a pending row after them (one not given
// back, at or below the lease's last row). A lease whose later rows were
// all published then holds nothing: without this read such a room
// waited for the lease to run out though its rows were given back. The
// read does not lock: a row inserted after it comes after the rows taken,
// as one inserted after the locking read does.
func (s *Store) heldBeyond(ctx context.Context, q querier, rows []persistence.OutboxRow, take []roomTake,
	leases map[persistence.RoomKey]roomLease, owner string, nowMs int64) (map[persistence.RoomKey]bool, error) {
	last := make(map[persistence.RoomKey]persistence.OutboxRow, len(take))
	count := make(map[persistence.RoomKey]int, len(take))
	for _, r := range rows {
		k := persistence.RoomKey{AppCode: r.Envelope.AppCode, RoomID: r.Envelope.RoomID}
		count[k]++
		if l, ok := last[k]; !ok || persistence.CompareRoomOrder(l, r) < 0 {
			last[k] = r
		}
	}
	var (
		q1   strings.Builder
		args []any
	)
	for _, t := range take {
		l, ok := leases[t.key]
		r, has := last[t.key]
		if !ok || !has || count[t.key] < t.n || l.until <= nowMs || l.owner == owner || l.covers(r) {
			continue
		}
		if !(r.Envelope.RoomSeq < l.uptoSeq || r.Envelope.RoomSeq == l.uptoSeq && r.EventIndex < l.uptoIndex) {
			continue
		}
		if q1.Len() > 0 {
			q1.WriteString(" UNION ALL ")
		}
		q1.WriteString("(SELECT app_code, room_id FROM room_outbox FORCE INDEX (idx_room_outbox_room)" +
			" WHERE app_code = ? AND room_id = ? AND status = 'pending' AND lock_until_ms >= 0" +
			" AND (room_seq > ? OR (room_seq = ? AND event_index > ?))" +
			" AND (room_seq < ? OR (room_seq = ? AND event_index <= ?)) LIMIT 1)")
		args = append(args, t.key.AppCode, t.key.RoomID, r.Envelope.RoomSeq, r.Envelope.RoomSeq, r.EventIndex,
			l.uptoSeq, l.uptoSeq, l.uptoIndex)
	}
	held := map[persistence.RoomKey]bool{}
	if q1.Len() == 0 {
		return held, nil
	}
	rs, err := q.QueryContext(ctx, q1.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var k persistence.RoomKey
		if err := rs.Scan(&k.AppCode, &k.RoomID); err != nil {
			return nil, err
		}
		held[k] = true
	}
	return held, rs.Err()
}

// shownLease is how readers see a row's lease: a given-back row has none.
func shownLease(rows []persistence.OutboxRow) {
	for i := range rows {
		if rows[i].LockUntilMs < 0 {
			rows[i].LockedBy, rows[i].LockUntilMs = "", 0
		}
	}
}

// roomLeases reads the room leases of keys (a plain read: in a claim's
// READ COMMITTED transaction it sees every lease committed before it).
func (s *Store) roomLeases(ctx context.Context, q querier, keys []persistence.RoomKey) (map[persistence.RoomKey]roomLease, error) {
	out := make(map[persistence.RoomKey]roomLease, len(keys))
	for part := range slices.Chunk(keys, 500) {
		in, args := roomArgs(part, nil)
		rs, err := q.QueryContext(ctx, "SELECT app_code, room_id, locked_by, lock_until_ms, upto_seq, upto_index FROM room_outbox_leases"+
			" WHERE (app_code, room_id) IN ("+in+")", args...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var (
				k persistence.RoomKey
				l roomLease
			)
			if err := rs.Scan(&k.AppCode, &k.RoomID, &l.owner, &l.until, &l.uptoSeq, &l.uptoIndex); err != nil {
				rs.Close()
				return nil, err
			}
			out[k] = l
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// writeLeases leases the rooms of rows (grouped by room, each room's in
// order) to owner until until: one statement for every room, whatever the
// number of rows. A row is written only when it had a lease of its own
// (the owner's insert lease, now the room's) or was given back. The
// returned rows carry the lease.
func (s *Store) writeLeases(ctx context.Context, tx querierExec, rows []persistence.OutboxRow, owner string, until int64) error {
	if len(rows) == 0 {
		return nil
	}
	var own []any
	for _, r := range rows {
		if r.LockUntilMs != 0 {
			own = append(own, r.Envelope.EventID)
		}
	}
	if len(own) > 0 {
		if _, err := tx.ExecContext(ctx, "UPDATE room_outbox SET locked_by = NULL, lock_until_ms = 0 WHERE event_id IN ("+placeholders(len(own))+")", own...); err != nil {
			return s.wrap("claim outbox", err)
		}
	}
	var (
		q    strings.Builder
		args []any
	)
	q.WriteString("INSERT INTO room_outbox_leases (app_code, room_id, locked_by, lock_until_ms, upto_seq, upto_index) VALUES ")
	for i := range rows {
		rows[i].LockedBy, rows[i].LockUntilMs = owner, until
		if i+1 < len(rows) && sameRoomRow(rows[i], rows[i+1]) {
			continue
		}
		if len(args) > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,?,?)")
		args = append(args, rows[i].Envelope.AppCode, rows[i].Envelope.RoomID, owner, until, rows[i].Envelope.RoomSeq, rows[i].EventIndex)
	}
	q.WriteString(" ON DUPLICATE KEY UPDATE locked_by = VALUES(locked_by), lock_until_ms = VALUES(lock_until_ms)," +
		" upto_seq = VALUES(upto_seq), upto_index = VALUES(upto_index)")
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return s.wrap("claim outbox", err)
	}
	return nil
}

func sameRoomRow(a, b persistence.OutboxRow) bool {
	return a.Envelope.AppCode == b.Envelope.AppCode && a.Envelope.RoomID == b.Envelope.RoomID
}

// withRoomLeases shows the room leases in rows for operators: a pending
// row without a lease of its own (or with an earlier one) that a room
// lease holds carries that lease.
func (s *Store) withRoomLeases(ctx context.Context, op string, rows []persistence.OutboxRow) ([]persistence.OutboxRow, error) {
	var keys []persistence.RoomKey
	seen := map[persistence.RoomKey]bool{}
	for _, r := range rows {
		k := persistence.RoomKey{AppCode: r.Envelope.AppCode, RoomID: r.Envelope.RoomID}
		if r.Status == persistence.OutboxPending && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		shownLease(rows)
		return rows, nil
	}
	leases, err := s.roomLeases(ctx, s.db, keys)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	for i, r := range rows {
		l, ok := leases[persistence.RoomKey{AppCode: r.Envelope.AppCode, RoomID: r.Envelope.RoomID}]
		if ok && r.Status == persistence.OutboxPending && l.covers(r) && l.until > r.LockUntilMs {
			rows[i].LockedBy, rows[i].LockUntilMs = l.owner, l.until
		}
	}
	shownLease(rows)
	return rows, nil
}
