package memdb

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/hyapp/roomcell/persistence"
)

// selectOutbox returns the ids of the rows match admits among sel's
// statuses, oldest first, at most sel.Limit (0 = all). Callers hold mu.
func (t *outboxTable) selectOutbox(sel persistence.OutboxSelector, match func(persistence.OutboxRow) bool) []string {
	statuses := []string{persistence.OutboxParked, persistence.OutboxPending}
	if sel.Status != "" {
		statuses = []string{sel.Status}
	}
	var found []persistence.OutboxRow
	for _, st := range statuses {
		t.scanStatus(st, math.MinInt64, "", func(e *outboxEntry) bool {
			if row := e.row(); match(row) {
				found = append(found, row)
			}
			return true
		})
	}
	// A limit that cuts a command takes its first events: a requeue never
	// sends a command's later events while earlier ones stay parked.
	slices.SortFunc(found, persistence.CompareListOrder)
	if sel.Limit > 0 && len(found) > sel.Limit {
		found = found[:sel.Limit]
	}
	ids := make([]string, len(found))
	for i, r := range found {
		ids[i] = r.Envelope.EventID
	}
	return ids
}

// bulkOutbox selects under the write lock and, unless dry, applies change
// to every selected row before the lock is released, so no sender's mark
// lands between the choice and the change.
func (s *Store) bulkOutbox(ctx context.Context, sel persistence.OutboxSelector, dry bool, match func(persistence.OutboxRow) bool, change func(*persistence.OutboxRow) bool) (int, error) {
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	if sel.Status != "" && sel.Status != persistence.OutboxParked && sel.Status != persistence.OutboxPending {
		return 0, nil // no other status is ever changed in bulk
	}
	t := s.outbox
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := t.selectOutbox(sel, match)
	if dry {
		return len(ids), nil
	}
	for _, id := range ids {
		t.update(id, change)
	}
	return len(ids), nil
}

func requeueMatch(sel persistence.OutboxSelector, nowMs int64) func(persistence.OutboxRow) bool {
	return func(r persistence.OutboxRow) bool { return sel.MatchesRequeue(r, nowMs) }
}

// CountRequeueOutbox implements persistence.OutboxBulkStore.
func (s *Store) CountRequeueOutbox(ctx context.Context, sel persistence.OutboxSelector, nowMs int64) (int, error) {
	return s.bulkOutbox(ctx, sel, true, requeueMatch(sel, nowMs), nil)
}

// BulkRequeueOutbox implements persistence.OutboxBulkStore.
func (s *Store) BulkRequeueOutbox(ctx context.Context, sel persistence.OutboxSelector, nowMs int64) (int, error) {
	return s.bulkOutbox(ctx, sel, false, requeueMatch(sel, nowMs), func(r *persistence.OutboxRow) bool {
		// A parked row leaves its room's lease; a pending one keeps its
		// sender's.
		requeueLease(r)
		r.Status = persistence.OutboxPending
		r.NextRetryAtMs = nowMs
		r.UpdatedAtMs = nowMs
		return true
	})
}

// CountSkipOutbox implements persistence.OutboxBulkStore.
func (s *Store) CountSkipOutbox(ctx context.Context, sel persistence.OutboxSelector) (int, error) {
	return s.bulkOutbox(ctx, sel, true, sel.MatchesSkip, nil)
}

// BulkSkipOutbox implements persistence.OutboxBulkStore.
func (s *Store) BulkSkipOutbox(ctx context.Context, sel persistence.OutboxSelector, by, reason string, nowMs int64) (int, error) {
	return s.bulkOutbox(ctx, sel, false, sel.MatchesSkip, func(r *persistence.OutboxRow) bool {
		r.Status = persistence.OutboxSkipped
		r.ResolvedBy, r.ResolvedAtMs, r.Resolution = by, nowMs, reason
		r.UpdatedAtMs = nowMs
		r.LockedBy, r.LockUntilMs = "", 0
		return true
	})
}

// bulkNotices selects the failed rows sel admits, oldest source event
// first, and unless dry applies change to each, all in one write
// transaction.
func (s *NoticeStore) bulkNotices(ctx context.Context, sel persistence.NoticeSelector, dry bool, change func(*persistence.NoticeDelivery)) (int, error) {
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	txn := s.db.Txn(!dry)
	defer txn.Abort()
	var found []persistence.NoticeDelivery
	err := scanNotices(txn, persistence.NoticeFailed, sel.SourceName, func(e *noticeEntry) bool {
		if sel.Matches(e.Row) {
			found = append(found, e.Row)
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("memdb: bulk requeue notices: %w", err)
	}
	slices.SortFunc(found, func(a, b persistence.NoticeDelivery) int {
		return cmp.Or(cmp.Compare(a.SourceCreatedAtMs, b.SourceCreatedAtMs), cmp.Compare(a.NoticeKey.String(), b.NoticeKey.String()))
	})
	if sel.Limit > 0 && len(found) > sel.Limit {
		found = found[:sel.Limit]
	}
	if dry {
		return len(found), nil
	}
	for _, d := range found {
		d = d.Clone()
		change(&d)
		if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
			return 0, fmt.Errorf("memdb: bulk requeue %s: %w", d.NoticeKey, err)
		}
	}
	txn.Commit()
	return len(found), nil
}

// CountRequeue implements persistence.NoticeBulkStore.
func (s *NoticeStore) CountRequeue(ctx context.Context, sel persistence.NoticeSelector) (int, error) {
	return s.bulkNotices(ctx, sel, true, nil)
}

// BulkRequeue implements persistence.NoticeBulkStore.
func (s *NoticeStore) BulkRequeue(ctx context.Context, sel persistence.NoticeSelector, nowMs int64) (int, error) {
	return s.bulkNotices(ctx, sel, false, func(d *persistence.NoticeDelivery) {
		d.Status = persistence.NoticeRetryable
		d.RetryCount = 0
		d.NextRetryAtMs, d.UpdatedAtMs = nowMs, nowMs
		d.RequeueCount++
		d.RequeuedAtMs = nowMs
	})
}

// BulkSkip implements persistence.NoticeBulkStore.
func (s *NoticeStore) BulkSkip(ctx context.Context, sel persistence.NoticeSelector, by, reason string, nowMs int64) (int, error) {
	return s.bulkNotices(ctx, sel, false, func(d *persistence.NoticeDelivery) {
		d.Status = persistence.NoticeSkipped
		d.LastError = persistence.SkipText(by, reason, d.LastError)
		d.NextRetryAtMs, d.UpdatedAtMs = nowMs, nowMs
	})
}
