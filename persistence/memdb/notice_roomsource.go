package memdb

import (
	"context"
	"fmt"
	"slices"

	"github.com/hyapp/roomcell/persistence"
)

// RoomOutboxAfter is the notice workers' read-only scan of room_outbox
// (actors/notice/roomnotice): up to limit rows of eventType with
// (created_at_ms, event_id) > (afterMs, afterID), in that order, whatever
// their status; the relay's pending/published state is no business of a
// notice. It never writes. Rows are stored by (status, created_at_ms,
// event_id), so it walks both statuses from the cursor in one snapshot and
// merges them; rows of other types are skipped.
func (s *Store) RoomOutboxAfter(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]persistence.OutboxRow, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 || eventType == "" {
		return nil, nil
	}
	txn := s.db.Txn(false)
	var out []persistence.OutboxRow
	for _, status := range []string{persistence.OutboxPending, persistence.OutboxPublished} {
		it, err := txn.LowerBound(tableOutbox, indexStatus, status, afterMs, afterID)
		if err != nil {
			return nil, fmt.Errorf("memdb: scan room outbox: %w", err)
		}
		n := 0
		for raw := it.Next(); raw != nil && n < limit; raw = it.Next() {
			e := raw.(*outboxEntry)
			if e.Status != status {
				break
			}
			if e.CreatedAtMs == afterMs && e.EventID <= afterID {
				continue // LowerBound is inclusive; the cursor row itself was read
			}
			if e.EventType != eventType {
				continue
			}
			out = append(out, e.row())
			n++
		}
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
