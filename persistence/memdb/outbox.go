package memdb

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/tidwall/btree"

	"github.com/hyapp/roomcell/persistence"
)

// ListPendingOutbox implements persistence.OutboxStore. limit <= 0 returns
// nothing: a scan is always bounded.
func (s *Store) ListPendingOutbox(ctx context.Context, limit int) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	var out []persistence.OutboxRow
	if limit <= 0 {
		return out, nil
	}
	s.outbox.mu.RLock()
	defer s.outbox.mu.RUnlock()
	return s.outbox.listStatus(persistence.OutboxPending, limit), nil
}

// listStatus returns up to limit rows of one status (limit <= 0: all) in
// persistence.CompareListOrder. The status set is in (created_at_ms,
// event_id) order, so the walk goes on past limit through the rows of
// the last one's millisecond before the cut. Callers hold mu.
func (t *outboxTable) listStatus(status string, limit int) []persistence.OutboxRow {
	var out []persistence.OutboxRow
	t.scanStatus(status, math.MinInt64, "", func(e *outboxEntry) bool {
		if limit > 0 && len(out) >= limit && e.CreatedAtMs != out[len(out)-1].CreatedAtMs {
			return false
		}
		out = append(out, t.shown(e))
		return true
	})
	slices.SortFunc(out, persistence.CompareListOrder)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// ClaimPendingOutbox implements persistence.OutboxStore. The scan and the
// lease writes are under one write lock, so two owners can never both see
// a room as free. Rooms come in the order of their oldest due free row's
// creation (the pending rows by created_at_ms, event_id), as in the MySQL
// store: a room whose row failed and waited for its retry keeps its place
// by age instead of queueing behind every row created before the retry
// came due.
func (s *Store) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	rows, _, err := s.ClaimPendingOutboxFrom(ctx, owner, nowMs, leaseMs, limit, persistence.OutboxScanMark{})
	return rows, err
}

// ClaimPendingOutboxFrom implements persistence.OutboxClaimResumer: the
// walk of ClaimPendingOutbox from from on.
func (s *Store) ClaimPendingOutboxFrom(ctx context.Context, owner string, nowMs, leaseMs int64, limit int,
	from persistence.OutboxScanMark) ([]persistence.OutboxRow, persistence.OutboxScanMark, error) {
	start := pivot(persistence.OutboxPending, math.MinInt64, "")
	if from.Set {
		start = pivot(persistence.OutboxPending, from.CreatedAtMs, from.EventID)
	}
	reached := from
	rows, err := s.claimOutbox(ctx, limit, func(t *outboxTable) []persistence.OutboxRow {
		out, at := t.claimByRoom(t.statusSet(persistence.OutboxPending).tree, start, limit,
			func(e *outboxEntry) (bool, bool) {
				if e.Status != persistence.OutboxPending {
					return false, false
				}
				return e.NextRetryAtMs <= nowMs && e.LockUntilMs <= nowMs && !t.leasedAt(e, nowMs), true
			},
			func(key persistence.RoomKey, n int) []persistence.OutboxRow {
				return t.claimRoom(key, owner, nowMs, leaseMs, n)
			})
		if at != nil {
			reached = persistence.OutboxScanMark{CreatedAtMs: at.CreatedAtMs, EventID: at.Envelope.EventID, Set: true}
		}
		return out
	})
	if err != nil {
		return nil, from, err
	}
	return rows, reached, nil
}

// claimByRoom is the claims' walk: candidate rooms in set's order from
// from (a row for which candidate says take is a candidate of its room;
// more false ends the walk), each then claimed (claim, with the rows the
// claim can still take), until limit rows. Candidates are collected a
// chunk at a time, only as many as the claim can still take, then claimed:
// a B-tree must not be walked across writes to it. The next chunk goes on
// from the last row looked at; a row claimed meanwhile keeps its place
// (the sets' orders do not read the lease) and its room is seen. At most
// claimScanRooms rooms per row of limit are tried: a claim behind many
// rooms that cannot be taken ends instead of trying all of them. Callers
// hold mu for writing. It also returns where a later walk may resume (the
// row looked at just before the first row of a room the claim did not
// try, else the last row looked at; nil: the walk's start).
func (t *outboxTable) claimByRoom(set *btree.BTreeG[*outboxEntry], from *outboxEntry, limit int,
	candidate func(*outboxEntry) (take, more bool),
	claim func(key persistence.RoomKey, n int) []persistence.OutboxRow) ([]persistence.OutboxRow, *outboxEntry) {
	var (
		out  []persistence.OutboxRow
		last *outboxEntry
	)
	seen := map[persistence.RoomKey]bool{}
	budget := limit * claimScanRooms
	for len(out) < limit && budget > 0 {
		var (
			rooms  []persistence.RoomKey
			before []*outboxEntry // per room, the row looked at before its first
		)
		want := limit - len(out)
		set.Ascend(from, func(e *outboxEntry) bool {
			take, more := candidate(e)
			if !more {
				return false
			}
			prev := last
			from, last = e, e
			if !take {
				return true
			}
			key := persistence.RoomKey{AppCode: e.AppCode, RoomID: e.RoomID}
			if !seen[key] {
				seen[key] = true
				rooms = append(rooms, key)
				before = append(before, prev)
				budget--
			}
			return len(rooms) < want && budget > 0
		})
		if len(rooms) == 0 {
			break
		}
		for i, key := range rooms {
			if len(out) >= limit {
				return out, before[i]
			}
			out = append(out, claim(key, limit-len(out))...)
		}
	}
	return out, last
}

// claimScanRooms is how many rooms a claim tries per row it may take
// (the MySQL store reads up to 4 pages of 4 × limit rows).
const claimScanRooms = 16

// ClaimRoomOutbox implements persistence.OutboxStore.
func (s *Store) ClaimRoomOutbox(ctx context.Context, key persistence.RoomKey, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	return s.claimOutbox(ctx, limit, func(t *outboxTable) []persistence.OutboxRow {
		return t.claimRoom(key, owner, nowMs, leaseMs, limit)
	})
}

// claimOutbox runs claim under the outbox's write lock, after the checks
// every claim makes first.
func (s *Store) claimOutbox(ctx context.Context, limit int, claim func(t *outboxTable) []persistence.OutboxRow) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	return claim(s.outbox), nil
}

// claimRoom leases the lowest pending rows of one room to owner, unless
// another owner holds any of its pending rows (by the row's own lease or
// the room's) or its lowest is not due. The lease is the room's
// (roomLease, as room_outbox_leases in the MySQL store): a row keeps no
// lease of its own once claimed. Callers hold mu for writing.
func (t *outboxTable) claimRoom(key persistence.RoomKey, owner string, nowMs, leaseMs int64, limit int) []persistence.OutboxRow {
	l, leased := t.leases[key]
	foreign := leased && l.until > nowMs && l.owner != owner
	until := nowMs + leaseMs
	rows := t.leaseRoom(t.room, key, limit,
		func(e *outboxEntry, first bool) (held, stop bool) {
			if e.LockUntilMs > nowMs && e.LockedBy != owner || foreign && l.covers(e) {
				return true, true // held by another sender
			}
			return false, first && e.NextRetryAtMs > nowMs // the room waits for its earliest row
		},
		func(row *persistence.OutboxRow) { row.LockedBy, row.LockUntilMs = "", 0 })
	if len(rows) == 0 {
		return nil
	}
	last := rows[len(rows)-1]
	t.leases[key] = roomLease{owner: owner, until: until, uptoSeq: last.Envelope.RoomSeq, uptoIndex: last.EventIndex}
	for i := range rows {
		rows[i].LockedBy, rows[i].LockUntilMs = owner, until
	}
	return rows
}

// leasedAt: a live room lease holds e (e is no claim's candidate, as a
// row under a live lease of its own is not). Callers hold mu.
func (t *outboxTable) leasedAt(e *outboxEntry, nowMs int64) bool {
	l, ok := t.leases[persistence.RoomKey{AppCode: e.AppCode, RoomID: e.RoomID}]
	return ok && l.until > nowMs && l.covers(e)
}

// roomLease is a room's claim lease: owner holds the room's pending rows
// up to (uptoSeq, uptoIndex) until until, except the rows given back.
type roomLease struct {
	owner     string
	until     int64
	uptoSeq   int64
	uptoIndex int
}

// covers: the lease holds e (if e is pending and not given back).
func (l roomLease) covers(e *outboxEntry) bool {
	return e.LockUntilMs >= 0 && (e.RoomSeq < l.uptoSeq || e.RoomSeq == l.uptoSeq && int(e.EventIndex) <= l.uptoIndex)
}

// givenBack is the LockUntilMs of a pending row its sender gave back (a
// failure, a release) or an operator requeued from parked: its room's
// lease no longer holds it. Readers see no lease.
const givenBack = -1

// shown is e as readers see it: a pending row its room's lease holds
// carries that lease; a given-back row carries none. Callers hold mu.
func (t *outboxTable) shown(e *outboxEntry) persistence.OutboxRow {
	r := e.row()
	if r.Status == persistence.OutboxPending {
		if l, ok := t.leases[persistence.RoomKey{AppCode: e.AppCode, RoomID: e.RoomID}]; ok && l.covers(e) && l.until > r.LockUntilMs {
			r.LockedBy, r.LockUntilMs = l.owner, l.until
		}
	}
	return withoutGivenBack(r)
}

// withoutGivenBack shows a given-back row without a lease.
func withoutGivenBack(r persistence.OutboxRow) persistence.OutboxRow {
	if r.LockUntilMs < 0 {
		r.LockedBy, r.LockUntilMs = "", 0
	}
	return r
}

// leaseRoom walks one room's rows in index (IM- or MQ-pending) from its
// lowest and leases up to limit of them, setting the lease by lease. check
// sees each row (first: no row is taken yet): a held row leaves the room
// to its holder (nothing is leased), a stop ends the walk there. Callers
// hold mu for writing.
func (t *outboxTable) leaseRoom(index roomSets, key persistence.RoomKey, limit int,
	check func(e *outboxEntry, first bool) (held, stop bool), lease func(*persistence.OutboxRow)) []persistence.OutboxRow {
	set := index[key]
	if set == nil {
		return nil
	}
	var rows []*outboxEntry
	held := false
	set.tree.Scan(func(e *outboxEntry) bool {
		h, stop := check(e, len(rows) == 0)
		if h {
			held = true
			return false
		}
		if stop {
			return false
		}
		if len(rows) < limit {
			rows = append(rows, e)
		}
		return true
	})
	if held {
		return nil
	}
	out := make([]persistence.OutboxRow, 0, len(rows))
	for _, e := range rows {
		row := e.row()
		lease(&row)
		t.put(newOutboxEntry(e.Envelope, row))
		out = append(out, row)
	}
	return out
}

// updateOutbox applies change to a copy of one row under the write lock.
// change returns false to leave the row as it is.
func (s *Store) updateOutbox(ctx context.Context, op, eventID string, change func(*persistence.OutboxRow) bool) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	if !s.outbox.update(eventID, change) {
		return fmt.Errorf("memdb: %s: outbox event %q: %w", op, eventID, persistence.ErrNotFound)
	}
	return nil
}

// updateRows is updateOutbox for many rows under one lock; unknown ids are
// skipped.
func (s *Store) updateRows(ctx context.Context, eventIDs []string, change func(*persistence.OutboxRow) bool) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	for _, id := range eventIDs {
		s.outbox.update(id, change)
	}
	return nil
}

// update applies change to a copy of row eventID and stores the copy;
// found is false when there is no such row. Callers hold mu for writing.
func (t *outboxTable) update(eventID string, change func(*persistence.OutboxRow) bool) (found bool) {
	e := t.get(eventID)
	if e == nil {
		return false
	}
	row := e.fields()
	if change(&row) {
		t.put(newOutboxEntry(e.Envelope, row))
	}
	return true
}

// MarkOutboxPublished implements persistence.OutboxStore.
func (s *Store) MarkOutboxPublished(ctx context.Context, eventID string, nowMs int64) error {
	return s.updateOutbox(ctx, "mark published", eventID, func(r *persistence.OutboxRow) bool {
		return markPublished(r, nowMs)
	})
}

// markPublished sets a pending row published; false for any other row:
// a late report must not undo an operator's park or skip.
func markPublished(r *persistence.OutboxRow, nowMs int64) bool {
	if r.Status != persistence.OutboxPending {
		return false
	}
	r.Status = persistence.OutboxPublished
	r.LastError = ""
	r.PublishedAtMs = nowMs
	r.UpdatedAtMs = nowMs
	r.LockedBy, r.LockUntilMs = "", 0
	return true
}

// MarkOutboxPublishedRuns implements persistence.OutboxRunMarker: the
// pending rows of each run's room within its bounds, given-back ones left
// out, marked as MarkOutboxPublishedBatch marks them.
func (s *Store) MarkOutboxPublishedRuns(ctx context.Context, runs []persistence.OutboxRun, nowMs int64) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	for _, run := range runs {
		set := s.outbox.room[run.Room]
		if set == nil {
			continue
		}
		var ids []string
		set.tree.Scan(func(e *outboxEntry) bool {
			if e.RoomSeq > run.ToSeq || e.RoomSeq == run.ToSeq && int(e.EventIndex) > run.ToIndex {
				return false
			}
			if (e.RoomSeq > run.FromSeq || e.RoomSeq == run.FromSeq && int(e.EventIndex) >= run.FromIndex) && e.LockUntilMs != givenBack {
				ids = append(ids, e.Envelope.EventID)
			}
			return true
		})
		// Marked after the walk: a B-tree must not be walked across
		// writes to it.
		for _, id := range ids {
			s.outbox.update(id, func(r *persistence.OutboxRow) bool { return markPublished(r, nowMs) })
		}
	}
	return nil
}

// MarkOutboxPublishedBatch implements persistence.OutboxStore.
func (s *Store) MarkOutboxPublishedBatch(ctx context.Context, eventIDs []string, nowMs int64) error {
	return s.updateRows(ctx, eventIDs, func(r *persistence.OutboxRow) bool {
		return markPublished(r, nowMs)
	})
}

// MarkOutboxFailed implements persistence.OutboxStore.
func (s *Store) MarkOutboxFailed(ctx context.Context, eventID, lastError string, nowMs, nextRetryAtMs int64) error {
	return s.updateOutbox(ctx, "mark failed", eventID, func(r *persistence.OutboxRow) bool {
		// A late failure report (say, the sync publish timing out after
		// the relay already delivered) must not reopen a finished row.
		if r.Status != persistence.OutboxPending {
			return false
		}
		r.RetryCount++
		r.LastError = lastError
		r.UpdatedAtMs = nowMs
		r.NextRetryAtMs = nextRetryAtMs
		r.LockedBy, r.LockUntilMs = "", givenBack
		return true
	})
}

// ParkOutbox implements persistence.OutboxStore.
func (s *Store) ParkOutbox(ctx context.Context, eventID, lastError string, nowMs int64) error {
	return s.updateOutbox(ctx, "park", eventID, func(r *persistence.OutboxRow) bool {
		if r.Status != persistence.OutboxPending {
			return false
		}
		r.Status = persistence.OutboxParked
		r.RetryCount++
		r.LastError = lastError
		r.UpdatedAtMs = nowMs
		r.LockedBy, r.LockUntilMs = "", 0
		return true
	})
}

// RequeueOutbox implements persistence.OutboxStore.
func (s *Store) RequeueOutbox(ctx context.Context, eventID string, nowMs int64) error {
	var conflict error
	err := s.updateOutbox(ctx, "requeue", eventID, func(r *persistence.OutboxRow) bool {
		if r.Status != persistence.OutboxParked && r.Status != persistence.OutboxPending {
			conflict = fmt.Errorf("memdb: requeue %s: row is %s: %w", eventID, r.Status, persistence.ErrConflict)
			return false
		}
		// A parked row leaves its room's lease; a pending one keeps its
		// sender's.
		requeueLease(r)
		r.Status = persistence.OutboxPending
		r.NextRetryAtMs = nowMs
		r.UpdatedAtMs = nowMs
		return true
	})
	return cmp.Or(err, conflict)
}

// SkipOutbox implements persistence.OutboxStore.
func (s *Store) SkipOutbox(ctx context.Context, eventID, by, reason string, nowMs int64) error {
	var conflict error
	err := s.updateOutbox(ctx, "skip", eventID, func(r *persistence.OutboxRow) bool {
		switch r.Status {
		case persistence.OutboxSkipped:
			return false
		case persistence.OutboxPublished:
			conflict = fmt.Errorf("memdb: skip %s: row is published: %w", eventID, persistence.ErrConflict)
			return false
		}
		r.Status = persistence.OutboxSkipped
		r.ResolvedBy, r.ResolvedAtMs, r.Resolution = by, nowMs, reason
		r.UpdatedAtMs = nowMs
		r.LockedBy, r.LockUntilMs = "", 0
		return true
	})
	return cmp.Or(err, conflict)
}

// ReleaseOutbox implements persistence.OutboxStore.
func (s *Store) ReleaseOutbox(ctx context.Context, eventID string) error {
	return s.updateOutbox(ctx, "release", eventID, releaseLease)
}

// ReleaseOutboxBatch implements persistence.OutboxStore.
func (s *Store) ReleaseOutboxBatch(ctx context.Context, eventIDs []string) error {
	return s.updateRows(ctx, eventIDs, releaseLease)
}

// releaseLease gives a pending row back (its own lease cleared, its
// room's lease no longer holding it); any other row is left alone.
func releaseLease(r *persistence.OutboxRow) bool {
	if r.Status != persistence.OutboxPending {
		return false
	}
	r.LockedBy, r.LockUntilMs = "", givenBack
	return true
}

// requeueLease is a requeue's lease change, before the status: a parked
// row leaves its room's lease, a pending row keeps its sender's.
func requeueLease(r *persistence.OutboxRow) {
	if r.Status == persistence.OutboxParked {
		r.LockedBy, r.LockUntilMs = "", givenBack
	}
}

// MarkOutboxEffectsDone implements persistence.OutboxStore.
func (s *Store) MarkOutboxEffectsDone(ctx context.Context, eventID string, steps uint32) error {
	return s.updateOutbox(ctx, "mark effects done", eventID, func(r *persistence.OutboxRow) bool {
		if r.EffectsDone|steps == r.EffectsDone {
			return false
		}
		r.EffectsDone |= steps
		return true
	})
}

// GetOutbox implements persistence.OutboxStore.
func (s *Store) GetOutbox(ctx context.Context, eventID string) (persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.OutboxRow{}, err
	}
	s.outbox.mu.RLock()
	defer s.outbox.mu.RUnlock()
	e := s.outbox.get(eventID)
	if e == nil {
		return persistence.OutboxRow{}, fmt.Errorf("memdb: outbox event %q: %w", eventID, persistence.ErrNotFound)
	}
	return s.outbox.shown(e), nil
}

// ListOutbox implements persistence.OutboxStore. Limit <= 0 means no limit.
// Without a status filter it walks the whole table: an operator query, not
// a hot path.
func (s *Store) ListOutbox(ctx context.Context, f persistence.OutboxFilter) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	full := func(n int) bool { return f.Limit > 0 && n >= f.Limit }
	t := s.outbox
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []persistence.OutboxRow
	if f.Status != "" {
		return t.listStatus(f.Status, f.Limit), nil
	}
	all := make([]persistence.OutboxRow, 0, len(t.byID))
	for _, e := range t.byID {
		all = append(all, t.shown(e))
	}
	slices.SortFunc(all, persistence.CompareListOrder)
	for _, r := range all {
		if full(len(out)) {
			break
		}
		out = append(out, r)
	}
	return out, nil
}

// OutboxStats implements persistence.OutboxStore.
func (s *Store) OutboxStats(ctx context.Context) (persistence.OutboxStats, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.OutboxStats{}, err
	}
	t := s.outbox
	t.mu.RLock()
	defer t.mu.RUnlock()
	st := persistence.OutboxStats{MQPending: int64(t.mq.tree.Len())}
	if s := t.byStatus[persistence.OutboxPending]; s != nil {
		st.Pending = int64(s.tree.Len())
	}
	t.scanStatus(persistence.OutboxPending, math.MinInt64, "", func(e *outboxEntry) bool {
		st.OldestCreatedAtMs = e.CreatedAtMs
		return false
	})
	t.scanStatus(persistence.OutboxParked, math.MinInt64, "", func(*outboxEntry) bool {
		st.Parked++
		return true
	})
	return st, nil
}
