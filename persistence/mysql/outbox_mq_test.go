package mysql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// The MQ fanout's progress is its own table: a fanout claim that holds
// its rows' locks (a fanout frozen inside its claim) never holds the IM
// side, whose claim, mark and failure of the same rows go through at
// once; and neither side's writes change the other's. With the rows in
// one table, the IM mark of a row waited for the fanout's lock and failed
// after innodb_lock_wait_timeout.
func TestMQLocksNeverHoldTheIMChannel(t *testing.T) {
	s := newTestStore(t, nil, WithOutboxMQ(true))
	ctx := t.Context()
	key := roomKey(1)
	for seq := int64(1); seq <= 3; seq++ {
		if err := s.Append(ctx, testAppend(key, seq, fmt.Sprint("c", seq), false)); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRows(t, s, "SELECT COUNT(*) FROM room_outbox_mq WHERE mq_status = 'pending'"); n != 6 {
		t.Fatalf("fanout on: %d MQ-pending rows, want 6 (one per outbox row)", n)
	}
	// The fanout's claim, frozen with its rows locked.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var locked int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT event_id FROM room_outbox_mq WHERE mq_status = 'pending' FOR UPDATE) l").Scan(&locked); err != nil || locked != 6 {
		t.Fatalf("fanout lock: %d rows, %v", locked, err)
	}

	start := time.Now()
	got, err := s.ClaimPendingOutbox(ctx, "relay-1", 5000, 10_000, 10)
	if err != nil || len(got) != 6 {
		t.Fatalf("IM claim under the fanout's locks: %d rows, %v", len(got), err)
	}
	ids := claimedIDs(got)
	if err := s.MarkOutboxPublishedBatch(ctx, ids[:4], 5001); err != nil {
		t.Fatalf("IM mark under the fanout's locks: %v", err)
	}
	if err := s.MarkOutboxFailed(ctx, ids[4], "im down", 5002, 9000); err != nil {
		t.Fatalf("IM failure under the fanout's locks: %v", err)
	}
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Fatalf("the IM side waited %s for the fanout's locks", took)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	for i, id := range ids {
		row, err := s.GetOutbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wantIM := persistence.OutboxPending
		if i < 4 {
			wantIM = persistence.OutboxPublished
		}
		if row.Status != wantIM || row.MQStatus != persistence.OutboxMQPending || row.MQLockUntilMs != 0 {
			t.Fatalf("%s: IM %q MQ %q (MQ lease %d), want IM %q MQ pending without a lease", id, row.Status, row.MQStatus, row.MQLockUntilMs, wantIM)
		}
	}
	// And the fanout's own writes leave the IM side as it was.
	mq, err := s.ClaimOutboxMQ(ctx, "mq-1", 6000, 10_000, 10)
	if err != nil || len(mq) != 6 {
		t.Fatalf("MQ claim: %d rows, %v", len(mq), err)
	}
	if err := s.MarkOutboxMQPublished(ctx, claimedIDs(mq), 6001); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		row, err := s.GetOutbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if row.MQStatus != persistence.OutboxMQPublished || row.MQPublishedAtMs != 6001 {
			t.Fatalf("%s after the MQ mark: MQ %q at %d", id, row.MQStatus, row.MQPublishedAtMs)
		}
		if (i < 4) != (row.Status == persistence.OutboxPublished) || (i == 4 && (row.RetryCount != 1 || row.LastError != "im down")) {
			t.Fatalf("%s: the MQ mark changed the IM side: %+v", id, row)
		}
	}
	st, err := s.OutboxStats(context.Background())
	if err != nil || st.MQPending != 0 || st.Pending != 2 {
		t.Fatalf("stats: %+v %v, want MQPending 0, Pending 2", st, err)
	}
}
