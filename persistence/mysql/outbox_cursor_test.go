package mysql

import (
	"fmt"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// OutboxReadStatus and OutboxReadPublishedAt, the SQL that tests and
// operators run on room_outbox, read every row as the store does: rows
// the cursor passed, rows marked in the row after a gap, a failed row, a
// parked one and rows never sent.
func TestOutboxReadExpressionsMatchTheStore(t *testing.T) {
	s := newTestStore(t, nil)
	ctx := t.Context()
	var ids []string
	for seq := int64(1); seq <= 7; seq++ {
		ids = append(ids, putOutbox(t, s, "rx", seq, 100*seq, "", 0))
	}
	if _, err := s.ClaimPendingOutbox(ctx, "relay", 1000, 60_000, 10); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.MarkOutboxPublishedBatch(ctx, ids[:2], 1100))          // the cursor
	must(s.MarkOutboxFailed(ctx, ids[2], "im down", 1200, 9000))  // waits
	must(s.ReleaseOutboxBatch(ctx, ids[3:]))                      // given back
	must(s.MarkOutboxPublishedBatch(ctx, []string{ids[4]}, 1300)) // after a gap: in the row
	must(s.ParkOutbox(ctx, ids[5], "bad", 1400))                  // parked
	rows, err := s.db.QueryContext(ctx, "SELECT event_id, "+OutboxReadStatus+", "+OutboxReadPublishedAt+" FROM room_outbox")
	must(err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			id, status string
			at         int64
		)
		must(rows.Scan(&id, &status, &at))
		g, err := s.GetOutbox(ctx, id)
		must(err)
		if status != g.Status || at != g.PublishedAtMs {
			t.Errorf("%s: SQL reads %s at %d, the store %s at %d", id, status, at, g.Status, g.PublishedAtMs)
		}
		n++
	}
	must(rows.Err())
	if n != len(ids) {
		t.Fatalf("read %d rows, wrote %d", n, len(ids))
	}
	want := fmt.Sprint([]string{persistence.OutboxPublished, persistence.OutboxPublished, persistence.OutboxPending, persistence.OutboxPending,
		persistence.OutboxPublished, persistence.OutboxParked, persistence.OutboxPending})
	var got []string
	for _, id := range ids {
		g, _ := s.GetOutbox(ctx, id)
		got = append(got, g.Status)
	}
	if fmt.Sprint(got) != want {
		t.Fatalf("statuses %v, want %s", got, want)
	}
}
