package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// implements is s as a T (an optional store interface both stores
// implement), or fails t.
func implements[T any](t *testing.T, s persistence.Store) T {
	t.Helper()
	r, ok := s.(T)
	if !ok {
		var want *T
		t.Fatalf("%T does not implement %T", s, want)
	}
	return r
}

// seedInterleaved writes rooms rooms of perRoom rows each, the rooms'
// rows interleaved in time (room 0's first row, room 1's first row, ...,
// room 0's second row, ...), and returns each room's ids in room order.
func seedInterleaved(t *testing.T, s persistence.Store, prefix string, rooms, perRoom int) [][]string {
	t.Helper()
	ids := make([][]string, rooms)
	for i := range perRoom {
		for r := range rooms {
			key := persistence.RoomKey{AppCode: "app1", RoomID: fmt.Sprintf("%s-%d", prefix, r)}
			id := fmt.Sprintf("%s-%d-ev-%d", prefix, r, i)
			seq := int64(i + 1)
			mustAppend(t, s, persistence.Append{Command: command(key, seq, fmt.Sprintf("%s-cmd-%d", key.RoomID, seq), int64(100+i*rooms+r), id)})
			ids[r] = append(ids[r], id)
		}
	}
	return ids
}

// A claim resumed where the one before it stopped takes none of that
// claim's rooms and skips no room that claim did not look at: with the
// rooms' rows interleaved, the first claim fills with rooms 0 and 1, and
// the resumed one takes rooms 2 and 3 whole, though room 2's first row
// comes before rows of rooms 0 and 1.
func testClaimResumeTakesNextRooms(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	r := implements[persistence.OutboxClaimResumer](t, s)
	ids := seedInterleaved(t, s, "rr", 5, 2)
	first, at, err := r.ClaimPendingOutboxFrom(ctx, "relay-a/1", 1000, 60_000, 4, persistence.OutboxScanMark{})
	mustNoErr(t, "first claim", err)
	wantIDs(t, "first claim", eventIDs(first), slices.Concat(ids[0], ids[1]))
	if !at.Set {
		t.Fatal("a claim that took rows returned no place to resume from")
	}
	second, at2, err := r.ClaimPendingOutboxFrom(ctx, "relay-a/2", 1000, 60_000, 4, at)
	mustNoErr(t, "resumed claim", err)
	wantIDs(t, "resumed claim", eventIDs(second), slices.Concat(ids[2], ids[3]))
	// The plain claim agrees: the same rooms, the held ones left out.
	third, _, err := r.ClaimPendingOutboxFrom(ctx, "relay-a/3", 1000, 60_000, 4, at2)
	mustNoErr(t, "last resumed claim", err)
	wantIDs(t, "last resumed claim", eventIDs(third), ids[4])
	for _, row := range slices.Concat(first, second, third) {
		if g := getOutbox(t, s, row.Envelope.EventID); g.LockUntilMs != 61_000 {
			t.Fatalf("%s claimed but stored with lease until %d", row.Envelope.EventID, g.LockUntilMs)
		}
	}
}

// A room whose rows lie before the place a claim resumes from is not
// served by that claim even once it is free; a claim from the start
// serves it. A claim that looked at every due row returns the last one,
// and a claim resumed there finds nothing.
func testClaimResumeFromStartServesSkipped(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	r := implements[persistence.OutboxClaimResumer](t, s)
	ids := seedInterleaved(t, s, "rs", 3, 2)
	first, at, err := r.ClaimPendingOutboxFrom(ctx, "relay-a/1", 1000, 60_000, 100, persistence.OutboxScanMark{})
	mustNoErr(t, "claim of everything", err)
	wantIDs(t, "claim of everything", eventIDs(first), slices.Concat(ids[0], ids[1], ids[2]))
	// Room 1's rows come back (its send failed and was given back).
	mustNoErr(t, "release room 1", s.ReleaseOutboxBatch(ctx, ids[1]))
	got, _, err := r.ClaimPendingOutboxFrom(ctx, "relay-a/2", 1000, 60_000, 100, at)
	mustNoErr(t, "resumed claim", err)
	wantIDs(t, "a claim resumed after every row", eventIDs(got), nil)
	got, _, err = r.ClaimPendingOutboxFrom(ctx, "relay-a/3", 1000, 60_000, 100, persistence.OutboxScanMark{})
	mustNoErr(t, "claim from the start", err)
	wantIDs(t, "a claim from the start", eventIDs(got), ids[1])
}

// Chains of resumed claims under several owners at once: no room's rows
// under two owners, each room taken from its lowest row, no row twice,
// and after the leases expire everything comes back once.
func testClaimResumeConcurrentChains(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	r := implements[persistence.OutboxClaimResumer](t, s)
	const rooms, perRoom, chains, links = 12, 3, 4, 3
	ids := seedInterleaved(t, s, "rc", rooms, perRoom)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ledger = newClaimLedger()
		errs   []error
	)
	for c := range chains {
		wg.Go(func() {
			at := persistence.OutboxScanMark{}
			for l := range links {
				owner := fmt.Sprintf("relay-%d/%d", c, l)
				got, next, err := r.ClaimPendingOutboxFrom(ctx, owner, 1000, 60_000, 4, at)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				seen := map[string]bool{}
				for _, row := range got {
					id, room := row.Envelope.EventID, row.Envelope.RoomID
					errs = append(errs, ledger.record(owner, id, room)...)
					if !seen[room] && row.Envelope.RoomSeq != 1 {
						errs = append(errs, fmt.Errorf("%s took room %s from seq %d, not its lowest", owner, room, row.Envelope.RoomSeq))
					}
					seen[room] = true
				}
				mu.Unlock()
				at = next
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent resumed claims: %v", errors.Join(errs...))
	}
	if len(ledger.byID) == 0 {
		t.Fatal("concurrent resumed claims: nobody got a row")
	}
	rest, err := s.ClaimPendingOutbox(ctx, "sweeper", 70_000, 60_000, rooms*perRoom)
	mustNoErr(t, "sweeper claim", err)
	if len(rest) != rooms*perRoom {
		t.Fatalf("after expiry the sweeper got %d rows, want all %d (%d rooms)", len(rest), rooms*perRoom, len(ids))
	}
}
