package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// RunOutboxMQ runs the persistence.OutboxMQStore contract: the MQ fanout's
// progress is its own, independent of the IM status in both directions.
// newStore must return a store opened with the fanout on (mysql
// WithOutboxMQ(true), memdb WithOutboxMQ()); newPlain one with it off.
func RunOutboxMQ(t *testing.T, newStore, newPlain func(t *testing.T) persistence.Store) {
	t.Helper()
	runContract(t, newStore, []contractCase[persistence.Store]{
		{"AppendWritesMQPending", testMQAppendPending},
		{"IndependentOfIM", testMQIndependentOfIM},
		{"ClaimLeaseAndRelease", testMQClaimLease},
		{"ClaimConcurrentOwnersDisjoint", testMQClaimConcurrent},
		{"ClaimWholeRooms", testMQClaimWholeRooms},
		{"ManyEventsOfOneCommandInIndexOrder", testMQManyEventsInIndexOrder},
		{"ParkAndUnknown", testMQPark},
	})
	t.Run("FanoutOffWritesNone", func(t *testing.T) {
		s := newPlain(t)
		ids := seedOutbox(t, s, roomA, 100)
		if row := getOutbox(t, s, ids[0]); row.MQStatus != persistence.OutboxMQNone {
			t.Fatalf("fanout off: new row's MQStatus %q, want %q", row.MQStatus, persistence.OutboxMQNone)
		}
		rows, err := s.ClaimOutboxMQ(t.Context(), "mq-a", 1000, 500, 10)
		mustNoErr(t, "ClaimOutboxMQ", err)
		if len(rows) != 0 {
			t.Fatalf("fanout off: claimed %d rows", len(rows))
		}
	})
}

func testMQAppendPending(t *testing.T, s persistence.Store) {
	ids := seedOutbox(t, s, roomA, 300, 100, 200)
	for _, id := range ids {
		row := getOutbox(t, s, id)
		if row.MQStatus != persistence.OutboxMQPending || row.Status != persistence.OutboxPending || row.MQLockUntilMs != 0 || row.MQPublishedAtMs != 0 {
			t.Fatalf("new row %s: %+v, want IM and MQ pending, no MQ lease", id, row)
		}
	}
	st, err := s.OutboxStats(t.Context())
	mustNoErr(t, "OutboxStats", err)
	if st.MQPending != 3 || st.Pending != 3 {
		t.Fatalf("stats %+v, want 3 pending for IM and 3 for MQ", st)
	}
}

// IM marks (published, failed, parked, leases) never change the MQ
// progress, and MQ marks never change the IM status.
func testMQIndependentOfIM(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200, 300, 400)
	// The IM relay holds the room: the fanout still takes every row.
	imRows, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 60_000, 10)
	mustNoErr(t, "ClaimPendingOutbox", err)
	if len(imRows) != 4 {
		t.Fatalf("IM claim took %d rows, want 4", len(imRows))
	}
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[0], 1000))
	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, ids[1], "im down", 1000, 99_000))
	mustNoErr(t, "ParkOutbox", s.ParkOutbox(ctx, ids[2], "corrupt", 1000))
	rows, err := s.ClaimOutboxMQ(ctx, "mq-a", 1000, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "MQ claim under IM leases and marks", eventIDs(rows), ids)
	for _, r := range rows {
		if r.MQLockedBy != "mq-a" || r.MQLockUntilMs != 1500 {
			t.Fatalf("claimed row %s has MQ lease %q/%d, want mq-a/1500", r.Envelope.EventID, r.MQLockedBy, r.MQLockUntilMs)
		}
	}
	mustNoErr(t, "MarkOutboxMQPublished", s.MarkOutboxMQPublished(ctx, []string{ids[1], ids[3], "no-such-event"}, 1100))
	for i, want := range []struct{ im, mq string }{
		{persistence.OutboxPublished, persistence.OutboxMQPending},
		{persistence.OutboxPending, persistence.OutboxMQPublished},
		{persistence.OutboxParked, persistence.OutboxMQPending},
		{persistence.OutboxPending, persistence.OutboxMQPublished},
	} {
		row := getOutbox(t, s, ids[i])
		if row.Status != want.im || row.MQStatus != want.mq {
			t.Fatalf("row %d: IM %q MQ %q, want IM %q MQ %q", i, row.Status, row.MQStatus, want.im, want.mq)
		}
	}
	if row := getOutbox(t, s, ids[1]); row.MQPublishedAtMs != 1100 || row.MQLockUntilMs != 0 || row.RetryCount != 1 || row.LastError != "im down" || row.NextRetryAtMs != 99_000 {
		t.Fatalf("row 1 after both marks: %+v", row)
	}
	if row := getOutbox(t, s, ids[3]); row.LockedBy != "relay-a" || row.LockUntilMs != 61_000 {
		t.Fatalf("an MQ mark touched the IM lease: %+v", row)
	}
	// The IM relay's claim does not see the MQ marks either: its room is
	// still held by relay-a until its lease ends, then the IM-pending rows
	// come back.
	imRows, err = s.ClaimPendingOutbox(ctx, "relay-b", 100_000, 500, 10)
	mustNoErr(t, "ClaimPendingOutbox after MQ marks", err)
	wantIDs(t, "IM claim after MQ marks", eventIDs(imRows), []string{ids[1], ids[3]})
	st, err := s.OutboxStats(ctx)
	mustNoErr(t, "OutboxStats", err)
	if st.MQPending != 2 || st.Pending != 2 || st.Parked != 1 {
		t.Fatalf("stats %+v, want IM pending 2, parked 1, MQ pending 2", st)
	}
}

func testMQClaimLease(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	roomB := persistence.RoomKey{AppCode: "app1", RoomID: "room-b"}
	a := seedOutbox(t, s, roomA, 100, 300, 500)
	b := seedOutbox(t, s, roomB, 200, 400)
	rows, err := s.ClaimOutboxMQ(ctx, "mq-a", 1000, 500, 4)
	mustNoErr(t, "ClaimOutboxMQ", err)
	// Rooms oldest first, each room's lowest rows in room_seq order, at
	// most limit rows in all.
	wantIDs(t, "first claim", eventIDs(rows), []string{a[0], a[1], a[2], b[0]})
	rows, err = s.ClaimOutboxMQ(ctx, "mq-b", 1200, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "claim while mq-a holds both rooms", eventIDs(rows), nil)
	mustNoErr(t, "ReleaseOutboxMQ", s.ReleaseOutboxMQ(ctx, []string{b[0]}))
	rows, err = s.ClaimOutboxMQ(ctx, "mq-b", 1300, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "claim after a release", eventIDs(rows), []string{b[0], b[1]})
	// mq-a's lease expires at 1500: its rows come back to anyone.
	rows, err = s.ClaimOutboxMQ(ctx, "mq-c", 1500, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "claim after mq-a's lease expired", eventIDs(rows), []string{a[0], a[1], a[2]})
	mustNoErr(t, "MarkOutboxMQPublished", s.MarkOutboxMQPublished(ctx, slices.Concat(a, b), 1600))
	rows, err = s.ClaimOutboxMQ(ctx, "mq-d", 1_000_000, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	if len(rows) != 0 {
		t.Fatalf("published rows claimed again: %v", eventIDs(rows))
	}
	if rows, err := s.ClaimOutboxMQ(ctx, "mq-d", 0, 500, 0); err != nil || len(rows) != 0 {
		t.Fatalf("limit 0: %d rows, %v", len(rows), err)
	}
}

// A room has one MQ sender: while owner A holds a room's first rows, no
// other owner gets any later row of it (it would reach the topic before
// A's), until A's rows are published, released or their lease ends;
// other rooms stay claimable.
func testMQClaimWholeRooms(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	roomB := persistence.RoomKey{AppCode: "app1", RoomID: "room-b"}
	a := seedOutbox(t, s, roomA, 100, 200, 300, 400)
	b := seedOutbox(t, s, roomB, 250, 350)
	rows, err := s.ClaimOutboxMQ(ctx, "mq-a", 1000, 500, 2)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "mq-a's claim", eventIDs(rows), a[:2])
	rows, err = s.ClaimOutboxMQ(ctx, "mq-b", 1100, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "mq-b's claim while mq-a holds room-a's first rows", eventIDs(rows), b)
	mustNoErr(t, "MarkOutboxMQPublished", s.MarkOutboxMQPublished(ctx, b, 1150))
	// One of mq-a's rows published, the other still leased: the room is
	// still mq-a's.
	mustNoErr(t, "MarkOutboxMQPublished", s.MarkOutboxMQPublished(ctx, a[:1], 1200))
	rows, err = s.ClaimOutboxMQ(ctx, "mq-b", 1200, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "mq-b's claim while mq-a holds room-a's second row", eventIDs(rows), nil)
	mustNoErr(t, "ReleaseOutboxMQ", s.ReleaseOutboxMQ(ctx, a[1:2]))
	rows, err = s.ClaimOutboxMQ(ctx, "mq-b", 1300, 500, 2)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "mq-b's claim after mq-a released", eventIDs(rows), a[1:3])
	// mq-b's lease ends at 1800; until then room-a is its own.
	rows, err = s.ClaimOutboxMQ(ctx, "mq-c", 1799, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "mq-c's claim while mq-b's lease lives", eventIDs(rows), nil)
	rows, err = s.ClaimOutboxMQ(ctx, "mq-c", 1800, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "mq-c's claim after mq-b's lease ended", eventIDs(rows), a[1:])
}

// Concurrent claimers never hold the same row, and together they take
// every row once.
func testMQClaimConcurrent(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	var all []string
	for r := range 8 {
		key := persistence.RoomKey{AppCode: "app1", RoomID: fmt.Sprint("room-", r)}
		all = append(all, seedOutbox(t, s, key, 100, 200, 300, 400, 500)...)
	}
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprint("mq-", w)
			for range 20 {
				rows, err := s.ClaimOutboxMQ(ctx, owner, 1000, 60_000, 3)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, r := range rows {
					if prev, ok := got[r.Envelope.EventID]; ok {
						mu.Unlock()
						errs <- fmt.Errorf("row %s claimed by %s and %s", r.Envelope.EventID, prev, owner)
						return
					}
					got[r.Envelope.EventID] = owner
				}
				mu.Unlock()
				// A claimer publishes what it took: a room's later rows
				// wait for its earlier ones.
				if err := s.MarkOutboxMQPublished(ctx, eventIDs(rows), 1000); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Fatalf("claimed %d distinct rows, want all %d", len(got), len(all))
	}
}

func testMQPark(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200)
	mustNoErr(t, "ParkOutboxMQ", s.ParkOutboxMQ(ctx, ids[0]))
	row := getOutbox(t, s, ids[0])
	if row.MQStatus != persistence.OutboxMQParked || row.Status != persistence.OutboxPending {
		t.Fatalf("parked for MQ: %+v, want MQ parked and IM still pending", row)
	}
	rows, err := s.ClaimOutboxMQ(ctx, "mq-a", 1000, 500, 10)
	mustNoErr(t, "ClaimOutboxMQ", err)
	wantIDs(t, "claim after a park", eventIDs(rows), ids[1:])
	if err := s.ParkOutboxMQ(ctx, "no-such-event"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("ParkOutboxMQ of an unknown event: %v, want ErrNotFound", err)
	}
}

// The MQ fanout's claim keeps a command's events in the command's order
// too, whatever its limit cuts (the ids' text puts index 10 before 2).
func testMQManyEventsInIndexOrder(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	big := bigCommand(t, s, roomA, 1, 25, 100)
	claimInSteps(t, big, []int{4, 9, 1, 100}, func(limit int, now int64) ([]string, error) {
		got, err := s.ClaimOutboxMQ(ctx, "mq-a", now, 500, limit)
		if err == nil {
			err = s.MarkOutboxMQPublished(ctx, eventIDs(got), now)
		}
		return eventIDs(got), err
	})
}
