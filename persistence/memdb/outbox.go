package memdb

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/persistence"
)

// scanStatus calls fn with the rows of one status, oldest first, until fn
// returns false.
func scanStatus(txn *memdb.Txn, status string, fn func(*outboxEntry) bool) error {
	it, err := txn.LowerBound(tableOutbox, indexStatus, status, int64(math.MinInt64), "")
	if err != nil {
		return err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		e := raw.(*outboxEntry)
		if e.Status != status || !fn(e) {
			return nil
		}
	}
	return nil
}

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
	err := scanStatus(s.db.Txn(false), persistence.OutboxPending, func(e *outboxEntry) bool {
		out = append(out, e.row())
		return len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("memdb: list pending outbox: %w", err)
	}
	return out, nil
}

// ClaimPendingOutbox implements persistence.OutboxStore. The scan and the
// lease writes share one write transaction; go-memdb admits one writer at a
// time, so two owners can never both see a room as free.
func (s *Store) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	var out []persistence.OutboxRow
	if limit <= 0 {
		return out, nil
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	// Collect the candidate rooms first: go-memdb iterators must not run
	// across writes to the index they walk.
	it, err := txn.LowerBound(tableOutbox, indexDue, int64(math.MinInt64), "")
	if err != nil {
		return nil, fmt.Errorf("memdb: claim outbox: %w", err)
	}
	seen := map[persistence.RoomKey]bool{}
	var rooms []persistence.RoomKey
	for raw := it.Next(); raw != nil; raw = it.Next() {
		e := raw.(*outboxEntry)
		if e.Status != persistence.OutboxPending || e.NextRetryAtMs > nowMs {
			break
		}
		key := persistence.RoomKey{AppCode: e.AppCode, RoomID: e.RoomID}
		if e.LockUntilMs > nowMs || seen[key] {
			continue
		}
		seen[key] = true
		rooms = append(rooms, key)
	}
	for _, key := range rooms {
		if len(out) >= limit {
			break
		}
		rows, err := claimRoom(txn, key, owner, nowMs, leaseMs, limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	txn.Commit()
	return out, nil
}

// ClaimRoomOutbox implements persistence.OutboxStore.
func (s *Store) ClaimRoomOutbox(ctx context.Context, key persistence.RoomKey, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	out, err := claimRoom(txn, key, owner, nowMs, leaseMs, limit)
	if err != nil {
		return nil, err
	}
	txn.Commit()
	return out, nil
}

// claimRoom leases the lowest pending rows of one room to owner, unless
// another owner holds any of its pending rows or its lowest is not due.
func claimRoom(txn *memdb.Txn, key persistence.RoomKey, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	it, err := txn.LowerBound(tableOutbox, indexRoom, key.AppCode, key.RoomID, int64(math.MinInt64), "")
	if err != nil {
		return nil, fmt.Errorf("memdb: claim outbox %s: %w", key, err)
	}
	var rows []*outboxEntry
	for raw := it.Next(); raw != nil; raw = it.Next() {
		e := raw.(*outboxEntry)
		if e.AppCode != key.AppCode || e.RoomID != key.RoomID || e.Status != persistence.OutboxPending {
			break
		}
		if e.LockUntilMs > nowMs && e.LockedBy != owner {
			return nil, nil // held by another sender
		}
		if len(rows) == 0 && e.NextRetryAtMs > nowMs {
			return nil, nil // the room waits for its earliest row
		}
		if len(rows) < limit {
			rows = append(rows, e)
		}
	}
	out := make([]persistence.OutboxRow, 0, len(rows))
	for _, e := range rows {
		row := e.row()
		row.LockedBy = owner
		row.LockUntilMs = nowMs + leaseMs
		if err := txn.Insert(tableOutbox, newOutboxEntry(e.Envelope, row)); err != nil {
			return nil, fmt.Errorf("memdb: claim outbox %s: %w", e.EventID, err)
		}
		out = append(out, row)
	}
	return out, nil
}

// updateOutbox applies change to a copy of one row in a write transaction.
// change returns false to leave the row as it is.
func (s *Store) updateOutbox(ctx context.Context, op, eventID string, change func(*persistence.OutboxRow) bool) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	found, err := updateRow(txn, op, eventID, change)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("memdb: %s: outbox event %q: %w", op, eventID, persistence.ErrNotFound)
	}
	txn.Commit()
	return nil
}

// updateRows is updateOutbox for many rows in one write transaction (a
// transaction each made the room publishers' marks ~18% of a hot room's
// CPU: every commit copies the radix paths it touched); unknown ids are
// skipped.
func (s *Store) updateRows(ctx context.Context, op string, eventIDs []string, change func(*persistence.OutboxRow) bool) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	for _, id := range eventIDs {
		if _, err := updateRow(txn, op, id, change); err != nil {
			return err
		}
	}
	txn.Commit()
	return nil
}

// updateRow applies change to a copy of row eventID in txn; found is false
// when there is no such row.
func updateRow(txn *memdb.Txn, op, eventID string, change func(*persistence.OutboxRow) bool) (found bool, err error) {
	raw, err := txn.First(tableOutbox, indexID, eventID)
	if err != nil {
		return false, fmt.Errorf("memdb: %s %s: %w", op, eventID, err)
	}
	if raw == nil {
		return false, nil
	}
	e := raw.(*outboxEntry)
	row := e.row()
	if !change(&row) {
		return true, nil
	}
	if err := txn.Insert(tableOutbox, newOutboxEntry(e.Envelope, row)); err != nil {
		return true, fmt.Errorf("memdb: %s %s: %w", op, eventID, err)
	}
	return true, nil
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

// MarkOutboxPublishedBatch implements persistence.OutboxStore.
func (s *Store) MarkOutboxPublishedBatch(ctx context.Context, eventIDs []string, nowMs int64) error {
	return s.updateRows(ctx, "mark published", eventIDs, func(r *persistence.OutboxRow) bool {
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
		r.LockedBy, r.LockUntilMs = "", 0
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
		// A parked row holds no lease; a pending one keeps its sender's.
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
	return s.updateOutbox(ctx, "release", eventID, func(r *persistence.OutboxRow) bool {
		if r.Status != persistence.OutboxPending {
			return false
		}
		r.LockedBy, r.LockUntilMs = "", 0
		return true
	})
}

// GetOutbox implements persistence.OutboxStore.
func (s *Store) GetOutbox(ctx context.Context, eventID string) (persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.OutboxRow{}, err
	}
	raw, err := s.db.Txn(false).First(tableOutbox, indexID, eventID)
	if err != nil {
		return persistence.OutboxRow{}, fmt.Errorf("memdb: get outbox %s: %w", eventID, err)
	}
	if raw == nil {
		return persistence.OutboxRow{}, fmt.Errorf("memdb: outbox event %q: %w", eventID, persistence.ErrNotFound)
	}
	return raw.(*outboxEntry).row(), nil
}

// ListOutbox implements persistence.OutboxStore. Limit <= 0 means no limit.
// Without a status filter it walks the whole table: an operator query, not
// a hot path.
func (s *Store) ListOutbox(ctx context.Context, f persistence.OutboxFilter) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	full := func(n int) bool { return f.Limit > 0 && n >= f.Limit }
	txn := s.db.Txn(false)
	var out []persistence.OutboxRow
	if f.Status != "" {
		err := scanStatus(txn, f.Status, func(e *outboxEntry) bool {
			out = append(out, e.row())
			return !full(len(out))
		})
		if err != nil {
			return nil, fmt.Errorf("memdb: list outbox: %w", err)
		}
		return out, nil
	}
	it, err := txn.Get(tableOutbox, indexID)
	if err != nil {
		return nil, fmt.Errorf("memdb: list outbox: %w", err)
	}
	var all []*outboxEntry
	for raw := it.Next(); raw != nil; raw = it.Next() {
		all = append(all, raw.(*outboxEntry))
	}
	slices.SortFunc(all, func(a, b *outboxEntry) int {
		return cmp.Or(cmp.Compare(a.CreatedAtMs, b.CreatedAtMs), cmp.Compare(a.EventID, b.EventID))
	})
	for _, e := range all {
		if full(len(out)) {
			break
		}
		out = append(out, e.row())
	}
	return out, nil
}

// OutboxStats implements persistence.OutboxStore.
func (s *Store) OutboxStats(ctx context.Context) (persistence.OutboxStats, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.OutboxStats{}, err
	}
	var st persistence.OutboxStats
	txn := s.db.Txn(false)
	err := scanStatus(txn, persistence.OutboxPending, func(e *outboxEntry) bool {
		if st.Pending == 0 {
			st.OldestCreatedAtMs = e.CreatedAtMs
		}
		st.Pending++
		return true
	})
	if err == nil {
		err = scanStatus(txn, persistence.OutboxParked, func(*outboxEntry) bool {
			st.Parked++
			return true
		})
	}
	if err == nil {
		var it memdb.ResultIterator
		it, err = txn.Get(tableOutbox, indexMQ)
		for err == nil {
			raw := it.Next()
			if raw == nil {
				break
			}
			st.MQPending++
		}
	}
	if err != nil {
		return persistence.OutboxStats{}, fmt.Errorf("memdb: outbox stats: %w", err)
	}
	return st, nil
}
