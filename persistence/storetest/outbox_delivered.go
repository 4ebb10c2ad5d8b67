package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// The published marks as the relay writes them, however the store keeps
// them (a mark per row, or a room's delivered cursor): every read shows a
// row published exactly when a mark named it, with that mark's time, and
// never a row the marks skipped.

// statusesOf reads each id's status and published_at_ms.
func statusesOf(t *testing.T, s persistence.Store, ids []string) (map[string]string, map[string]int64) {
	t.Helper()
	st, at := map[string]string{}, map[string]int64{}
	for _, id := range ids {
		g := getOutbox(t, s, id)
		st[id], at[id] = g.Status, g.PublishedAtMs
	}
	return st, at
}

// wantStatuses checks every read of the rows: GetOutbox (status and, for
// published rows, published_at_ms), the status listings, the pending scan
// and the stats' pending count.
func wantStatuses(t *testing.T, what string, s persistence.Store, ids []string, want map[string]string, wantAt map[string]int64) {
	t.Helper()
	ctx := t.Context()
	st, at := statusesOf(t, s, ids)
	var pending, published []string
	for _, id := range ids {
		if st[id] != want[id] {
			t.Fatalf("%s: %s reads %s, want %s (all: %v)", what, id, st[id], want[id], st)
		}
		if want[id] == persistence.OutboxPublished && at[id] != wantAt[id] {
			t.Fatalf("%s: %s published at %d, want %d", what, id, at[id], wantAt[id])
		}
		if want[id] != persistence.OutboxPublished && at[id] != 0 {
			t.Fatalf("%s: %s is %s with published_at_ms %d", what, id, want[id], at[id])
		}
		switch want[id] {
		case persistence.OutboxPending:
			pending = append(pending, id)
		case persistence.OutboxPublished:
			published = append(published, id)
		}
	}
	slices.Sort(pending)
	slices.Sort(published)
	for status, wantIDsOf := range map[string][]string{persistence.OutboxPending: pending, persistence.OutboxPublished: published} {
		rows, err := s.ListOutbox(ctx, persistence.OutboxFilter{Status: status})
		mustNoErr(t, "ListOutbox "+status, err)
		got := eventIDs(rows)
		slices.Sort(got)
		wantIDs(t, what+": ListOutbox "+status, got, wantIDsOf)
		for _, r := range rows {
			if r.Status != status {
				t.Fatalf("%s: ListOutbox %s returned a %s row %s", what, status, r.Status, r.Envelope.EventID)
			}
		}
	}
	scan, err := s.ListPendingOutbox(ctx, 1000)
	mustNoErr(t, "ListPendingOutbox", err)
	got := eventIDs(scan)
	slices.Sort(got)
	wantIDs(t, what+": ListPendingOutbox", got, pending)
	stats, err := s.OutboxStats(ctx)
	mustNoErr(t, "OutboxStats", err)
	if stats.Pending != int64(len(pending)) {
		t.Fatalf("%s: stats count %d pending, want %d", what, stats.Pending, len(pending))
	}
}

// Rows read as published exactly when a mark named them, each with its
// own mark's time: in order, out of order (a later row first), singly and
// in batches, and a mark of a published row again changes nothing.
func testDeliveredExactlyWhenMarked(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200, 300, 400, 500, 600)
	want := map[string]string{}
	at := map[string]int64{}
	for _, id := range ids {
		want[id] = persistence.OutboxPending
	}
	wantStatuses(t, "before any mark", s, ids, want, at)
	_, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 60_000, 10)
	mustNoErr(t, "claim", err)

	step := func(what string, nowMs int64, mark ...string) {
		t.Helper()
		mustNoErr(t, "MarkOutboxPublishedBatch", s.MarkOutboxPublishedBatch(ctx, mark, nowMs))
		for _, id := range mark {
			if want[id] != persistence.OutboxPublished {
				want[id], at[id] = persistence.OutboxPublished, nowMs
			}
		}
		wantStatuses(t, what, s, ids, want, at)
	}
	step("the first three in one batch", 2000, ids[0], ids[1], ids[2])
	step("a later row before the one ahead of it", 2100, ids[4])
	step("the row ahead of it", 2200, ids[3])
	step("marked again with the next", 2300, ids[0], ids[4], ids[5])
	mustNoErr(t, "MarkOutboxPublished again", s.MarkOutboxPublished(ctx, ids[2], 9000))
	wantStatuses(t, "a single mark of a published row", s, ids, want, at)
	got, err := s.ClaimPendingOutbox(ctx, "relay-b", 100_000, 500, 10)
	mustNoErr(t, "claim after all published", err)
	wantIDs(t, "nothing left to claim", eventIDs(got), nil)
}

// A row that fails, or is parked, in the middle of a room: the marks of
// the rows around it never show it (or a row the marks skipped) as
// published, the room's later rows wait behind a failed row and flow past
// a parked one, and a requeued row comes back and is published in turn.
func testDeliveredAroundFailure(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200, 300, 400, 500)
	want := map[string]string{}
	at := map[string]int64{}
	for _, id := range ids {
		want[id] = persistence.OutboxPending
	}
	got, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 60_000, 10)
	mustNoErr(t, "claim", err)
	wantIDs(t, "the room in order", eventIDs(got), ids)
	// ids[2] fails; the relay gives back the rows after it and marks the
	// rows before it, plus (a late report) ids[4].
	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, ids[2], "im down", 1100, 5000))
	mustNoErr(t, "ReleaseOutboxBatch", s.ReleaseOutboxBatch(ctx, ids[3:]))
	mustNoErr(t, "mark", s.MarkOutboxPublishedBatch(ctx, []string{ids[0], ids[1], ids[4]}, 1200))
	for _, i := range []int{0, 1, 4} {
		want[ids[i]], at[ids[i]] = persistence.OutboxPublished, 1200
	}
	wantStatuses(t, "failed row in the middle", s, ids, want, at)
	if g := getOutbox(t, s, ids[2]); g.RetryCount != 1 || g.LastError != "im down" || g.NextRetryAtMs != 5000 {
		t.Fatalf("failed row: %+v", g)
	}
	got, err = s.ClaimPendingOutbox(ctx, "relay-b", 2000, 60_000, 10)
	mustNoErr(t, "claim before the retry", err)
	wantIDs(t, "the room waits behind its failed row", eventIDs(got), nil)
	got, err = s.ClaimPendingOutbox(ctx, "relay-b", 5000, 60_000, 10)
	mustNoErr(t, "claim at the retry", err)
	wantIDs(t, "the failed row first, then the row the marks skipped", eventIDs(got), []string{ids[2], ids[3]})

	// Now it can never succeed: parked; its sender goes on with the row
	// after it.
	mustNoErr(t, "ParkOutbox", s.ParkOutbox(ctx, ids[2], "bad payload", 5100))
	want[ids[2]] = persistence.OutboxParked
	mustNoErr(t, "mark", s.MarkOutboxPublishedBatch(ctx, []string{ids[3]}, 5300))
	want[ids[3]], at[ids[3]] = persistence.OutboxPublished, 5300
	wantStatuses(t, "parked row in the middle", s, ids, want, at)

	// More rows come: the room flows past its parked row.
	more := seedOutboxFrom(t, s, roomA, 6, 5400, 5500)
	all := slices.Concat(ids, more)
	for _, id := range more {
		want[id] = persistence.OutboxPending
	}
	got, err = s.ClaimPendingOutbox(ctx, "relay-c", 5600, 60_000, 10)
	mustNoErr(t, "claim past the parked row", err)
	wantIDs(t, "the parked row's room goes on", eventIDs(got), more)
	mustNoErr(t, "ReleaseOutboxBatch", s.ReleaseOutboxBatch(ctx, more))
	wantStatuses(t, "new rows behind a parked one", s, all, want, at)
	// The operator requeues the parked row: it is pending, claimed first,
	// and published in turn.
	mustNoErr(t, "RequeueOutbox", s.RequeueOutbox(ctx, ids[2], 5600))
	want[ids[2]] = persistence.OutboxPending
	wantStatuses(t, "requeued", s, all, want, at)
	got, err = s.ClaimPendingOutbox(ctx, "relay-d", 5700, 60_000, 10)
	mustNoErr(t, "claim after the requeue", err)
	wantIDs(t, "the requeued row and the new ones in room order", eventIDs(got), []string{ids[2], more[0], more[1]})
	mustNoErr(t, "mark", s.MarkOutboxPublishedBatch(ctx, eventIDs(got), 5800))
	for _, id := range eventIDs(got) {
		want[id], at[id] = persistence.OutboxPublished, 5800
	}
	wantStatuses(t, "all delivered", s, all, want, at)
	if g := getOutbox(t, s, ids[2]); g.RetryCount != 2 || g.LastError != "" {
		t.Fatalf("published after a failure and a park: %+v, want retry_count 2 and no error", g)
	}
	// A late failure or park of a published row changes nothing.
	mustNoErr(t, "late MarkOutboxFailed", s.MarkOutboxFailed(ctx, ids[0], "late", 6000, 6000))
	mustNoErr(t, "late ParkOutbox", s.ParkOutbox(ctx, ids[1], "late", 6000))
	wantStatuses(t, "late reports", s, all, want, at)
}

// seedOutboxFrom appends one command per createdAt to key from seq on,
// one event each.
func seedOutboxFrom(t *testing.T, s persistence.Store, key persistence.RoomKey, seq int64, createdAts ...int64) []string {
	t.Helper()
	ids := make([]string, len(createdAts))
	for i, at := range createdAts {
		n := seq + int64(i)
		ids[i] = fmt.Sprintf("%s-late-%02d", key.RoomID, n)
		mustAppend(t, s, persistence.Append{Command: command(key, n, fmt.Sprintf("%s-cmd-%d", key.RoomID, n), at, ids[i])})
	}
	return ids
}

// Relays claiming the same rooms at once, each marking what it claimed
// (sometimes failing a room's row and releasing the rest, as the relay
// does), while rooms keep getting rows: every row is published exactly
// once, none is skipped, and each claim holds a room's rows in room order.
func testDeliveredConcurrentRelays(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	const rooms, perRoom, relays = 6, 24, 4
	keys := make([]persistence.RoomKey, rooms)
	var order [rooms][]string // each room's ids in room order
	for r := range rooms {
		keys[r] = persistence.RoomKey{AppCode: "app1", RoomID: fmt.Sprintf("race-%d", r)}
	}
	appendRow := func(r, seq int) {
		id := fmt.Sprintf("race-%d-%03d", r, seq)
		mustAppend(t, s, persistence.Append{Command: command(keys[r], int64(seq), fmt.Sprintf("race-%d-c%03d", r, seq), int64(100+seq), id)})
		order[r] = append(order[r], id)
	}
	for seq := 1; seq <= perRoom/2; seq++ {
		for r := range rooms {
			appendRow(r, seq)
		}
	}
	var (
		mu        sync.Mutex
		published = map[string]int{}
		failed    = map[string]bool{}
		wg        sync.WaitGroup
		errs      = make(chan error, relays)
		appended  = make(chan struct{})
	)
	go func() { // more rows arrive while the relays drain
		defer close(appended)
		for seq := perRoom/2 + 1; seq <= perRoom; seq++ {
			for r := range rooms {
				appendRow(r, seq)
			}
		}
	}()
	for w := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle, done := 0, false
			for round := 0; round < 5000; round++ {
				if !done {
					select {
					case <-appended:
						// Idle rounds count from here: rows may have
						// come after the ones before.
						done, idle = true, 0
					default:
					}
				}
				if done && idle >= 20 {
					return
				}
				got, err := s.ClaimPendingOutbox(ctx, fmt.Sprintf("relay-%d", w), 1000, 3_600_000, 1+(round*7+w)%9)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					idle++
					if !done {
						// Nothing to claim yet: wait for more rows rather
						// than spend the rounds, which a fast store (memdb)
						// used up before the rows came.
						select {
						case <-appended:
						case <-time.After(time.Millisecond):
						}
					}
					continue
				}
				idle = 0
				// Each room's rows in the claim: in room order.
				for i := 1; i < len(got); i++ {
					if sameRoomKey(got[i-1], got[i]) && persistence.CompareRoomOrder(got[i-1], got[i]) >= 0 {
						errs <- fmt.Errorf("claim of %s holds %s before %s", got[i].Envelope.RoomID, got[i-1].Envelope.EventID, got[i].Envelope.EventID)
						return
					}
				}
				// Every 5th round the first row of the first room fails
				// once: the room's later rows go back unsent.
				var ok, back []string
				failRoom := ""
				mu.Lock()
				if round%5 == 0 && !failed[got[0].Envelope.EventID] {
					failed[got[0].Envelope.EventID] = true
					failRoom = got[0].Envelope.RoomID
				}
				mu.Unlock()
				for i, r := range got {
					switch {
					case failRoom != "" && i == 0:
						if err := s.MarkOutboxFailed(ctx, r.Envelope.EventID, "im down", 1000, 1000); err != nil {
							errs <- err
							return
						}
					case r.Envelope.RoomID == failRoom:
						back = append(back, r.Envelope.EventID)
					default:
						ok = append(ok, r.Envelope.EventID)
					}
				}
				if err := s.ReleaseOutboxBatch(ctx, back); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, id := range ok {
					published[id]++
				}
				mu.Unlock()
				if err := s.MarkOutboxPublishedBatch(ctx, ok, 1000); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	<-appended
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []string
	for r := range rooms {
		all = append(all, order[r]...)
	}
	for _, id := range all {
		if published[id] != 1 {
			t.Fatalf("%s was sent %d times, want exactly once", id, published[id])
		}
		if g := getOutbox(t, s, id); g.Status != persistence.OutboxPublished {
			t.Fatalf("%s reads %s after every relay is done", id, g.Status)
		}
	}
	if len(published) != len(all) {
		t.Fatalf("%d rows sent, %d appended", len(published), len(all))
	}
	if st, err := s.OutboxStats(ctx); err != nil || st.Pending != 0 {
		t.Fatalf("stats after the drain: %+v %v, want nothing pending", st, err)
	}
}

func sameRoomKey(a, b persistence.OutboxRow) bool {
	return a.Envelope.AppCode == b.Envelope.AppCode && a.Envelope.RoomID == b.Envelope.RoomID
}

// An operator's requeue of a parked row racing a relay's mark of the
// room's later rows: the requeued row never reads as published (it was
// not delivered) and is claimed again; the marked rows stay published.
func testDeliveredRequeueRacesMark(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	for round := range 8 {
		key := persistence.RoomKey{AppCode: "app1", RoomID: fmt.Sprintf("rq-%d", round)}
		ids := seedOutbox(t, s, key, 100, 200, 300)
		owner := fmt.Sprintf("relay-%d", round)
		got, err := s.ClaimRoomOutbox(ctx, key, owner, 1000, 60_000, 3)
		mustNoErr(t, "claim", err)
		wantIDs(t, "the room", eventIDs(got), ids)
		mustNoErr(t, "ParkOutbox", s.ParkOutbox(ctx, ids[0], "bad", 1100))
		var wg sync.WaitGroup
		var requeueErr, markErr error
		wg.Add(2)
		go func() { defer wg.Done(); requeueErr = s.RequeueOutbox(ctx, ids[0], 1200) }()
		go func() { defer wg.Done(); markErr = s.MarkOutboxPublishedBatch(ctx, ids[1:], 1200) }()
		wg.Wait()
		mustNoErr(t, "RequeueOutbox", requeueErr)
		mustNoErr(t, "MarkOutboxPublishedBatch", markErr)
		for i, want := range []string{persistence.OutboxPending, persistence.OutboxPublished, persistence.OutboxPublished} {
			if g := getOutbox(t, s, ids[i]); g.Status != want {
				t.Fatalf("round %d: %s reads %s, want %s", round, ids[i], g.Status, want)
			}
		}
		got, err = s.ClaimRoomOutbox(ctx, key, "relay-next", 1300, 60_000, 10)
		mustNoErr(t, "claim after the race", err)
		wantIDs(t, "only the requeued row comes back", eventIDs(got), ids[:1])
		mustNoErr(t, "mark", s.MarkOutboxPublishedBatch(ctx, ids[:1], 1400))
		if g := getOutbox(t, s, ids[0]); g.Status != persistence.OutboxPublished || g.PublishedAtMs != 1400 {
			t.Fatalf("round %d: requeued row after its mark: %+v", round, g)
		}
	}
}
