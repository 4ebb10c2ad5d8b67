package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

func runOf(rows []persistence.OutboxRow) persistence.OutboxRun {
	first, last := rows[0], rows[len(rows)-1]
	return persistence.OutboxRun{Room: persistence.RoomKey{AppCode: first.Envelope.AppCode, RoomID: first.Envelope.RoomID},
		FromSeq: first.Envelope.RoomSeq, FromIndex: first.EventIndex, ToSeq: last.Envelope.RoomSeq, ToIndex: last.EventIndex}
}

func wantStatus(t *testing.T, s persistence.Store, what, status string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if g := getOutbox(t, s, id); g.Status != status {
			t.Fatalf("%s: %s is %s, want %s", what, id, g.Status, status)
		}
	}
}

// A run marks its claimed rows and nothing else: not a row inside it that
// failed, was released or parked after the claim, nor one a parked row an
// operator requeued while the claim was out (it was never sent), nor a
// later row of the room, nor another room's rows.
func testMarkRunsOnlyTheirRows(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	m := implements[persistence.OutboxRunMarker](t, s)
	ids := seedOutbox(t, s, roomA, 100, 110, 120, 130, 140, 150, 160)
	other := seedOutbox(t, s, persistence.RoomKey{AppCode: "app1", RoomID: "room-b"}, 105)
	// Row 2 is parked before the claim, so the claim passes over it.
	mustNoErr(t, "park", s.ParkOutbox(ctx, ids[1], "bad", 170))
	got, err := s.ClaimRoomOutbox(ctx, roomA, "relay-a", 1000, 60_000, 5)
	mustNoErr(t, "claim", err)
	wantIDs(t, "claim", eventIDs(got), []string{ids[0], ids[2], ids[3], ids[4], ids[5]})
	// While the claim is out: the parked row is requeued, one claimed row
	// fails, one is released, one is parked; a row is appended.
	mustNoErr(t, "requeue", s.RequeueOutbox(ctx, ids[1], 1010))
	mustNoErr(t, "fail", s.MarkOutboxFailed(ctx, ids[2], "im down", 1010, 5000))
	mustNoErr(t, "release", s.ReleaseOutboxBatch(ctx, []string{ids[3]}))
	mustNoErr(t, "park", s.ParkOutbox(ctx, ids[4], "refused", 1010))
	late := "room-a-late"
	mustAppend(t, s, persistence.Append{Command: command(roomA, 8, "cmd-late", 170, late)})
	mustNoErr(t, "mark runs", m.MarkOutboxPublishedRuns(ctx, []persistence.OutboxRun{runOf(got)}, 2000))
	wantStatus(t, s, "claimed and sent", persistence.OutboxPublished, ids[0], ids[5])
	for _, id := range []string{ids[0], ids[5]} {
		if g := getOutbox(t, s, id); g.PublishedAtMs != 2000 || g.LastError != "" || g.LockedBy != "" || g.LockUntilMs != 0 {
			t.Fatalf("marked row %s: %+v", id, g)
		}
	}
	wantStatus(t, s, "requeued, failed, released, never sent", persistence.OutboxPending, ids[1], ids[2], ids[3], ids[6], late, other[0])
	wantStatus(t, s, "parked after the claim", persistence.OutboxParked, ids[4])
	if g := getOutbox(t, s, ids[2]); g.RetryCount != 1 || g.LastError != "im down" || g.NextRetryAtMs != 5000 {
		t.Fatalf("failed row after the runs' mark: %+v", g)
	}
	// Marking again changes nothing.
	mustNoErr(t, "mark runs again", m.MarkOutboxPublishedRuns(ctx, []persistence.OutboxRun{runOf(got)}, 3000))
	if g := getOutbox(t, s, ids[0]); g.PublishedAtMs != 2000 {
		t.Fatalf("a second mark rewrote published_at_ms: %+v", g)
	}
}

// A run's bounds are (room_seq, event_index): a run from a command's 6th
// event to the next command's 2nd marks exactly those rows, the 11th
// event after the 2nd.
func testMarkRunsBoundsByIndex(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	m := implements[persistence.OutboxRunMarker](t, s)
	var first, second []string
	for i := range 12 {
		first = append(first, fmt.Sprintf("ri-1-%02d", i))
	}
	for i := range 3 {
		second = append(second, fmt.Sprintf("ri-2-%02d", i))
	}
	mustAppend(t, s, persistence.Append{Command: command(roomA, 1, "ri-cmd-1", 100, first...)})
	mustAppend(t, s, persistence.Append{Command: command(roomA, 2, "ri-cmd-2", 200, second...)})
	got, err := s.ClaimRoomOutbox(ctx, roomA, "relay-a", 1000, 60_000, 20)
	mustNoErr(t, "claim", err)
	if len(got) != 15 {
		t.Fatalf("claimed %d rows, want 15", len(got))
	}
	run := persistence.OutboxRun{Room: roomA, FromSeq: 1, FromIndex: 5, ToSeq: 2, ToIndex: 1}
	mustNoErr(t, "mark runs", m.MarkOutboxPublishedRuns(ctx, []persistence.OutboxRun{run}, 2000))
	wantStatus(t, s, "inside the run", persistence.OutboxPublished, append(append([]string{}, first[5:]...), second[:2]...)...)
	wantStatus(t, s, "outside the run", persistence.OutboxPending, append(append([]string{}, first[:5]...), second[2])...)
}

// Relays marking their runs while other relays claim and the rooms keep
// appending: every row a run named is published, every other row stays
// pending, and nobody fails (a deadlock victim runs again).
func testMarkRunsConcurrent(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	m := implements[persistence.OutboxRunMarker](t, s)
	const rooms, perRoom, workers = 12, 6, 4
	seedInterleaved(t, s, "mr", rooms, perRoom)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		marked = map[string]bool{}
		errs   []error
	)
	for w := range workers {
		wg.Go(func() {
			for round := range 6 {
				got, err := s.ClaimPendingOutbox(ctx, fmt.Sprintf("relay-%d-%d", w, round), 1000, 60_000, 5)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				// Mark each room's first rows, keep the last one back
				// (it is released, as after a failure).
				var runs []persistence.OutboxRun
				var back []string
				for i := 0; i < len(got); {
					j := i
					for j < len(got) && got[j].Envelope.RoomID == got[i].Envelope.RoomID {
						j++
					}
					if j-i > 1 {
						runs = append(runs, runOf(got[i:j-1]))
						mu.Lock()
						for _, r := range got[i : j-1] {
							marked[r.Envelope.EventID] = true
						}
						mu.Unlock()
					}
					back = append(back, got[j-1].Envelope.EventID)
					i = j
				}
				if err := s.ReleaseOutboxBatch(ctx, back); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				if err := m.MarkOutboxPublishedRuns(ctx, runs, 2000); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 10 {
			key := persistence.RoomKey{AppCode: "app1", RoomID: fmt.Sprintf("mr-%d", i%rooms)}
			if err := s.Append(ctx, persistence.Append{Command: command(key, int64(perRoom+1+i/rooms), fmt.Sprintf("mr-late-%d", i),
				5000, fmt.Sprintf("mr-late-ev-%d", i))}); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}
	})
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent claims, marks and appends: %v", errors.Join(errs...))
	}
	if len(marked) == 0 {
		t.Fatal("no run was marked")
	}
	all, err := s.ListOutbox(ctx, persistence.OutboxFilter{})
	mustNoErr(t, "list", err)
	for _, r := range all {
		if want := marked[r.Envelope.EventID]; (r.Status == persistence.OutboxPublished) != want {
			t.Fatalf("%s is %s; named by a run: %v", r.Envelope.EventID, r.Status, want)
		}
	}
}
