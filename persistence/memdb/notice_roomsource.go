package memdb

import (
	"context"

	"github.com/hyapp/roomcell/persistence"
)

// RoomOutboxAfter is the notice workers' read-only scan of room_outbox
// (actors/notice/roomnotice): up to limit rows of eventType with
// (created_at_ms, event_id) > (afterMs, afterID), in that order, pending
// or published; the relay's pending/published state is no business of a
// notice. It never changes a row. It reads the rows of eventType alone
// (outboxTable.byType, built on the type's first read): a scan with no new
// row of the type costs a seek, however many rows of other types came.
func (s *Store) RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 || eventType == "" {
		return nil, nil
	}
	t := s.outbox
	t.mu.RLock()
	set := t.byType[eventType]
	if set == nil {
		t.mu.RUnlock()
		t.mu.Lock()
		t.typeSet(eventType)
		t.mu.Unlock()
		t.mu.RLock()
		set = t.byType[eventType]
	}
	defer t.mu.RUnlock()
	var out []persistence.OutboxRow
	set.tree.Ascend(pivot("", afterMs, afterID), func(e *outboxEntry) bool {
		if e.CreatedAtMs == afterMs && e.EventID <= afterID {
			return true // the pivot is inclusive; the cursor row itself was read
		}
		if e.Status == persistence.OutboxPending || e.Status == persistence.OutboxPublished {
			out = append(out, withoutGivenBack(e.row()))
		}
		return len(out) < limit
	})
	return out, nil
}
