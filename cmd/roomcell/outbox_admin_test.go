package main

import (
	"context"
	"errors"
	"testing"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

func appendEvent(t *testing.T, s *memdb.Store, room, eventID string, atMs int64) {
	t.Helper()
	env := persistence.Envelope{EventID: eventID, EventType: "RoomUserJoined", AppCode: "app", RoomID: room, RoomSeq: 1, CommandID: "c1",
		CreatedAtMs: atMs, Payload: []byte("{}")}
	a := persistence.Append{Command: persistence.CommandRecord{AppCode: "app", RoomID: room, Seq: 1, CommandID: "c1", CommandType: "JoinRoom",
		Reply: []byte("{}"), Events: []persistence.Envelope{env}, CreatedAtMs: atMs}}
	if err := s.Append(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// The operators' outbox view covers every room database: lists merge in
// row order, stats add up, and a row named by event_id is changed in the
// database that holds it, not the first one.
func TestOutboxAdminSeesEveryRoomDatabase(t *testing.T) {
	ctx := context.Background()
	a, b := memdb.New(), memdb.New()
	appendEvent(t, a, "ra", "app:ra:1:0", 2000)
	appendEvent(t, b, "rb", "app:rb:1:0", 1000)
	o := roomOutboxes{OutboxStore: a, dbs: []*roomDB{{key: "default", store: a}, {key: "b", store: b}}}
	rows, err := o.ListOutbox(ctx, persistence.OutboxFilter{Limit: 10})
	if err != nil || len(rows) != 2 || rows[0].Envelope.EventID != "app:rb:1:0" || rows[1].Envelope.EventID != "app:ra:1:0" {
		t.Fatalf("list %v (%v), want b's row then a's", rows, err)
	}
	if rows, _ := o.ListOutbox(ctx, persistence.OutboxFilter{Limit: 1}); len(rows) != 1 {
		t.Fatalf("limit 1: %d rows", len(rows))
	}
	st, err := o.OutboxStats(ctx)
	if err != nil || st.Pending != 2 || st.OldestCreatedAtMs != 1000 {
		t.Fatalf("stats %+v (%v), want 2 pending, oldest 1000", st, err)
	}
	if err := o.SkipOutbox(ctx, "app:rb:1:0", "op", "test", 3000); err != nil {
		t.Fatal(err)
	}
	if row, err := b.GetOutbox(ctx, "app:rb:1:0"); err != nil || row.Status != persistence.OutboxSkipped {
		t.Fatalf("b's row after skip: %+v (%v)", row, err)
	}
	if row, _ := a.GetOutbox(ctx, "app:ra:1:0"); row.Status != persistence.OutboxPending {
		t.Fatalf("a's row changed by a skip of b's: %s", row.Status)
	}
	appendEvent(t, b, "rb2", "app:rb2:1:0", 1500)
	if err := b.ParkOutbox(ctx, "app:rb2:1:0", "bad", 3000); err != nil {
		t.Fatal(err)
	}
	if err := o.RequeueOutbox(ctx, "app:rb2:1:0", 4000); err != nil {
		t.Fatal(err)
	}
	if row, err := b.GetOutbox(ctx, "app:rb2:1:0"); err != nil || row.Status != persistence.OutboxPending {
		t.Fatalf("b's parked row after requeue: %+v (%v)", row, err)
	}
	if _, err := o.GetOutbox(ctx, "app:nope:1:0"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("unknown row: %v, want ErrNotFound", err)
	}
}
