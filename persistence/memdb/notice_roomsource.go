package memdb

import (
	"context"
	"slices"

	"github.com/hyapp/roomcell/persistence"
)

// RoomOutboxAfter is the notice workers' read-only scan of room_outbox
// (actors/notice/roomnotice): up to limit rows of eventType with
// (created_at_ms, event_id) > (afterMs, afterID), in that order, whatever
// their status; the relay's pending/published state is no business of a
// notice. It never writes. Rows are ordered by (status, created_at_ms,
// event_id), so it walks both statuses from the cursor under one read lock
// and merges them; rows of other types are skipped.
func (s *Store) RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 || eventType == "" {
		return nil, nil
	}
	s.outbox.mu.RLock()
	defer s.outbox.mu.RUnlock()
	var out []persistence.OutboxRow
	for _, status := range []string{persistence.OutboxPending, persistence.OutboxPublished} {
		n := 0
		s.outbox.scanStatus(status, afterMs, afterID, func(e *outboxEntry) bool {
			if e.CreatedAtMs == afterMs && e.EventID <= afterID {
				return true // the pivot is inclusive; the cursor row itself was read
			}
			if e.EventType == eventType {
				out = append(out, withoutGivenBack(e.row()))
				n++
			}
			return n < limit
		})
	}
	slices.SortFunc(out, func(a, b persistence.OutboxRow) int {
		if a.CreatedAtMs != b.CreatedAtMs {
			if a.CreatedAtMs < b.CreatedAtMs {
				return -1
			}
			return 1
		}
		switch {
		case a.Envelope.EventID < b.Envelope.EventID:
			return -1
		case a.Envelope.EventID > b.Envelope.EventID:
			return 1
		}
		return 0
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
