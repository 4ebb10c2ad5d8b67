package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// RunOutboxStore runs the persistence.OutboxStore contract: the rows an
// Append writes, the relay's claim leases and marks, and the operators'
// listings. It needs a whole persistence.Store because only Append writes
// outbox rows. newStore is as for RunRoomStore; every subtest gets its own
// store, because the outbox scans are store-wide.
func RunOutboxStore(t *testing.T, newStore func(t *testing.T) persistence.Store) {
	t.Helper()
	runContract(t, newStore, []contractCase[persistence.Store]{
		{"AppendWritesPendingOutboxRows", testAppendWritesPendingOutbox},
		{"ListPendingOldestFirstWithLimit", testListPendingOldestFirst},
		{"ClaimLeases", testClaimLeases},
		{"ClaimConcurrentOwnersDisjoint", testClaimConcurrentDisjoint},
		{"ClaimRoomOrderAndDue", testClaimRoomOrderAndDue},
		{"ManyEventsOfOneCommandInIndexOrder", testManyEventsInIndexOrder},
		{"ClaimOldestRoomFirst", testClaimOldestRoomFirst},
		{"ClaimResumeTakesNextRooms", testClaimResumeTakesNextRooms},
		{"ClaimResumeFromStartServesSkipped", testClaimResumeFromStartServesSkipped},
		{"ClaimResumeConcurrentChains", testClaimResumeConcurrentChains},
		{"ClaimInsertLease", testClaimInsertLease},
		{"ParkRequeueSkip", testParkRequeueSkip},
		{"MarkPublished", testMarkPublished},
		{"MarkPublishedBatch", testMarkPublishedBatch},
		{"MarkPublishedInsertLeased", testMarkPublishedInsertLeased},
		{"MarkRunsOnlyTheirRows", testMarkRunsOnlyTheirRows},
		{"MarkRunsBoundsByIndex", testMarkRunsBoundsByIndex},
		{"MarkRunsConcurrent", testMarkRunsConcurrent},
		{"MarkFailed", testMarkFailed},
		{"ReleaseOutbox", testReleaseOutbox},
		{"ReleaseOutboxBatch", testReleaseOutboxBatch},
		{"ListOutboxFilter", testListOutboxFilter},
		{"OutboxStats", testOutboxStats},
		{"BulkRequeueSkip", testOutboxBulk},
		{"BulkCutsCommandsInOrder", testOutboxBulkCutsCommandsInOrder},
		{"EffectsDone", testEffectsDone},
		{"EffectsDoneConcurrent", testEffectsDoneConcurrent},
		{"DeliveredExactlyWhenMarked", testDeliveredExactlyWhenMarked},
		{"DeliveredAroundFailureAndPark", testDeliveredAroundFailure},
		{"DeliveredConcurrentRelays", testDeliveredConcurrentRelays},
		{"DeliveredRequeueRacesMark", testDeliveredRequeueRacesMark},
	})
}

func eventIDs(rows []persistence.OutboxRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Envelope.EventID
	}
	return out
}

func wantIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

// seedOutbox appends one command per createdAt (seq 1, 2, ...) with one
// event each and returns the event IDs in append order. The IDs sort in the
// reverse of creation order, so a store that orders by event_id instead of
// created_at_ms fails the oldest-first checks.
func seedOutbox(t *testing.T, s persistence.Store, key persistence.RoomKey, createdAts ...int64) []string {
	t.Helper()
	ids := make([]string, len(createdAts))
	for i, at := range createdAts {
		seq := int64(i + 1)
		ids[i] = fmt.Sprintf("%s-ev-%02d", key.RoomID, 99-i)
		mustAppend(t, s, persistence.Append{Command: command(key, seq, fmt.Sprintf("%s-cmd-%d", key.RoomID, seq), at, ids[i])})
	}
	return ids
}

func getOutbox(t *testing.T, s persistence.Store, eventID string) persistence.OutboxRow {
	t.Helper()
	row, err := s.GetOutbox(t.Context(), eventID)
	mustNoErr(t, "GetOutbox "+eventID, err)
	return row
}

func testAppendWritesPendingOutbox(t *testing.T, s persistence.Store) {
	c := command(roomA, 1, "cmd-1", 1234, "ev-1a", "ev-1b")
	mustAppend(t, s, persistence.Append{Command: c})
	for i, e := range c.Events {
		got := getOutbox(t, s, e.EventID)
		want := persistence.OutboxRow{
			Envelope:      e,
			EventIndex:    i,
			Status:        persistence.OutboxPending,
			CreatedAtMs:   1234,
			UpdatedAtMs:   1234,
			NextRetryAtMs: 1234,                     // a new row is due at once
			MQStatus:      persistence.OutboxMQNone, // the MQ fanout is off
		}
		got.Envelope = normEnvelope(got.Envelope)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("outbox row %s:\n got %+v\nwant %+v", e.EventID, got, want)
		}
	}
}

func testListPendingOldestFirst(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 300, 100, 400, 200) // oldest: ids[1], ids[3], ids[0], ids[2]
	oldestFirst := []string{ids[1], ids[3], ids[0], ids[2]}

	got, err := s.ListPendingOutbox(ctx, 10)
	mustNoErr(t, "ListPendingOutbox", err)
	wantIDs(t, "ListPendingOutbox(10)", eventIDs(got), oldestFirst)
	got, err = s.ListPendingOutbox(ctx, 2)
	mustNoErr(t, "ListPendingOutbox", err)
	wantIDs(t, "ListPendingOutbox(2)", eventIDs(got), oldestFirst[:2])

	// Published rows leave the scan; leased rows stay (the scan ignores
	// leases).
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[1], 500))
	_, err = s.ClaimPendingOutbox(ctx, "relay-1", 500, 10_000, 1)
	mustNoErr(t, "ClaimPendingOutbox", err)
	got, err = s.ListPendingOutbox(ctx, 10)
	mustNoErr(t, "ListPendingOutbox", err)
	wantIDs(t, "ListPendingOutbox after one published, one leased", eventIDs(got), oldestFirst[1:])
}

func testClaimLeases(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200, 300, 400, 500)
	published := ids[4]
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, published, 50))

	a, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 2)
	mustNoErr(t, "claim a", err)
	wantIDs(t, "relay-a claims the room's two lowest", eventIDs(a), ids[:2])
	for _, r := range a {
		if r.LockedBy != "relay-a" || r.LockUntilMs != 1500 || r.Status != persistence.OutboxPending {
			t.Fatalf("claimed row as returned: %+v", r)
		}
		if g := getOutbox(t, s, r.Envelope.EventID); g.LockedBy != "relay-a" || g.LockUntilMs != 1500 {
			t.Fatalf("claimed row as stored: %+v", g)
		}
	}

	b, err := s.ClaimPendingOutbox(ctx, "relay-b", 1200, 500, 10)
	mustNoErr(t, "claim b", err)
	wantIDs(t, "relay-b gets nothing of a room another relay holds", eventIDs(b), nil)

	c, err := s.ClaimPendingOutbox(ctx, "relay-c", 1499, 500, 10)
	mustNoErr(t, "claim c", err)
	wantIDs(t, "nothing is free while the lease runs", eventIDs(c), nil)

	// At 1500 relay-a's lease (until 1500) has expired: the whole room
	// comes back, in room_seq order.
	c, err = s.ClaimPendingOutbox(ctx, "relay-c", 1500, 500, 10)
	mustNoErr(t, "claim c", err)
	wantIDs(t, "relay-c takes the room after the lease expired", eventIDs(c), ids[:4])
	if g := getOutbox(t, s, ids[0]); g.LockedBy != "relay-c" || g.LockUntilMs != 2000 {
		t.Fatalf("reclaimed row: %+v", g)
	}
	if g := getOutbox(t, s, published); g.LockedBy != "" || g.Status != persistence.OutboxPublished {
		t.Fatalf("a published row was claimed: %+v", g)
	}
}

// Many owners claim many rooms at once: no room ever has rows under two
// owners, every owner's rows of a room are the room's lowest in room_seq
// order, and every row is claimed exactly once.
func testClaimConcurrentDisjoint(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	const rooms, perRoom, owners = 8, 12, 6
	all := map[string]bool{}
	for r := range rooms {
		key := persistence.RoomKey{AppCode: "app1", RoomID: fmt.Sprintf("room-%d", r)}
		at := make([]int64, perRoom)
		for i := range at {
			at[i] = int64(100 + i*rooms + r)
		}
		for _, id := range seedOutbox(t, s, key, at...) {
			all[id] = true
		}
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ledger = newClaimLedger()
		errs   []error
	)
	for o := range owners {
		owner := fmt.Sprintf("relay-%d", o)
		wg.Go(func() {
			got, err := s.ClaimPendingOutbox(ctx, owner, 1000, 60_000, 15)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			last := map[string]int64{}
			for _, r := range got {
				id, room := r.Envelope.EventID, r.Envelope.RoomID
				errs = append(errs, ledger.record(owner, id, room)...)
				if r.Envelope.RoomSeq <= last[room] {
					errs = append(errs, fmt.Errorf("%s: room_seq %d after %d", owner, r.Envelope.RoomSeq, last[room]))
				}
				if last[room] == 0 && r.Envelope.RoomSeq != 1 {
					errs = append(errs, fmt.Errorf("%s took room %s from seq %d, not its lowest", owner, room, r.Envelope.RoomSeq))
				}
				last[room] = r.Envelope.RoomSeq
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent claims: %v", errors.Join(errs...))
	}
	if len(ledger.byID) == 0 {
		t.Fatal("concurrent claims: nobody got a row")
	}
	for id, owner := range ledger.byID {
		if g := getOutbox(t, s, id); g.LockedBy != owner {
			t.Fatalf("%s returned to %s but stored as locked by %q", id, owner, g.LockedBy)
		}
	}
	// Once the leases expired, what is left comes back exactly once.
	rest, err := s.ClaimPendingOutbox(ctx, "sweeper", 70_000, 60_000, rooms*perRoom)
	mustNoErr(t, "sweeper claim", err)
	if len(rest) != len(all) {
		t.Fatalf("after expiry the sweeper got %d rows, want all %d", len(rest), len(all))
	}
}

func testMarkPublished(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200)
	id := ids[0]
	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, id, "im timeout", 150, 150))
	_, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 1)
	mustNoErr(t, "claim", err)

	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, id, 1200))
	got := getOutbox(t, s, id)
	if got.Status != persistence.OutboxPublished || got.LastError != "" || got.PublishedAtMs != 1200 ||
		got.UpdatedAtMs != 1200 || got.RetryCount != 1 || got.LockedBy != "" || got.LockUntilMs != 0 || got.CreatedAtMs != 100 {
		t.Fatalf("published row: %+v", got)
	}

	mustNoErr(t, "MarkOutboxPublished again", s.MarkOutboxPublished(ctx, id, 3000))
	if again := getOutbox(t, s, id); !reflect.DeepEqual(normRow(again), normRow(got)) {
		t.Fatalf("marking a published row again changed it:\n got %+v\nwant %+v", again, got)
	}
	// A late failure report must not reopen a published row.
	mustNoErr(t, "MarkOutboxFailed of a published row", s.MarkOutboxFailed(ctx, id, "late", 4000, 4000))
	if after := getOutbox(t, s, id); !reflect.DeepEqual(normRow(after), normRow(got)) {
		t.Fatalf("a failure changed a published row:\n got %+v\nwant %+v", after, got)
	}
	if other := getOutbox(t, s, ids[1]); other.Status != persistence.OutboxPending {
		t.Fatalf("marking one row touched another: %+v", other)
	}
}

func testMarkPublishedBatch(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200, 300, 400)
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[0], 900))
	_, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 4)
	mustNoErr(t, "claim", err)
	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, ids[1], "im down", 1100, 1100))

	// ids[0] is already published, "nope" does not exist: both skipped.
	mustNoErr(t, "MarkOutboxPublishedBatch", s.MarkOutboxPublishedBatch(ctx, []string{ids[0], ids[1], ids[2], "nope"}, 2000))
	if g := getOutbox(t, s, ids[0]); g.PublishedAtMs != 900 {
		t.Fatalf("batch re-marked a published row: %+v", g)
	}
	for _, id := range ids[1:3] {
		g := getOutbox(t, s, id)
		if g.Status != persistence.OutboxPublished || g.PublishedAtMs != 2000 || g.UpdatedAtMs != 2000 || g.LastError != "" || g.LockedBy != "" || g.LockUntilMs != 0 {
			t.Fatalf("%s after batch mark: %+v", id, g)
		}
	}
	if g := getOutbox(t, s, ids[3]); g.Status != persistence.OutboxPending {
		t.Fatalf("batch touched a row it was not given: %+v", g)
	}
	mustNoErr(t, "empty batch", s.MarkOutboxPublishedBatch(ctx, nil, 3000))
	if st, err := s.OutboxStats(ctx); err != nil || st.Pending != 1 {
		t.Fatalf("stats after batch: %+v %v, want 1 pending", st, err)
	}
}

// A row its publisher leased at insert and then marked published shows
// no lease (in every read), while the room's next row keeps the
// publisher's lease: no relay takes it before the lease ends, and then
// only it comes back.
func testMarkPublishedInsertLeased(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	lease := &persistence.OutboxLease{Owner: "publisher-1", UntilMs: 5000}
	mustAppend(t, s, persistence.Append{Command: command(roomA, 1, "pub-cmd-1", 100, "pub-ev-1"), Lease: lease})
	mustAppend(t, s, persistence.Append{Command: command(roomA, 2, "pub-cmd-2", 200, "pub-ev-2"), Lease: lease})
	mustNoErr(t, "MarkOutboxPublishedBatch", s.MarkOutboxPublishedBatch(ctx, []string{"pub-ev-1"}, 1000))
	g := getOutbox(t, s, "pub-ev-1")
	if g.Status != persistence.OutboxPublished || g.LockedBy != "" || g.LockUntilMs != 0 || g.PublishedAtMs != 1000 || g.UpdatedAtMs != 1000 {
		t.Fatalf("published insert-leased row: %+v", g)
	}
	listed, err := s.ListOutbox(ctx, persistence.OutboxFilter{Status: persistence.OutboxPublished})
	mustNoErr(t, "ListOutbox published", err)
	if len(listed) != 1 || listed[0].Envelope.EventID != "pub-ev-1" || listed[0].LockedBy != "" || listed[0].LockUntilMs != 0 {
		t.Fatalf("published rows listed: %+v", listed)
	}
	if g := getOutbox(t, s, "pub-ev-2"); g.Status != persistence.OutboxPending || g.LockedBy != "publisher-1" || g.LockUntilMs != 5000 {
		t.Fatalf("the room's next row lost its insert lease: %+v", g)
	}
	got, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 10)
	mustNoErr(t, "claim under the publisher's lease", err)
	wantIDs(t, "a relay while the publisher holds the room", eventIDs(got), nil)
	got, err = s.ClaimPendingOutbox(ctx, "relay-a", 5000, 500, 10)
	mustNoErr(t, "claim after the lease", err)
	wantIDs(t, "a relay after the publisher's lease", eventIDs(got), []string{"pub-ev-2"})
	if g := getOutbox(t, s, "pub-ev-1"); g.Status != persistence.OutboxPublished || g.LockedBy != "" || g.PublishedAtMs != 1000 {
		t.Fatalf("a claim touched the published row: %+v", g)
	}
}

func normRow(r persistence.OutboxRow) persistence.OutboxRow {
	r.Envelope = normEnvelope(r.Envelope)
	return r
}

func testMarkFailed(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100)
	id := ids[0]
	_, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 10)
	mustNoErr(t, "claim", err)

	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, id, "im: 500 server busy", 1100, 1100))
	got := getOutbox(t, s, id)
	if got.Status != persistence.OutboxPending || got.RetryCount != 1 || got.LastError != "im: 500 server busy" ||
		got.UpdatedAtMs != 1100 || got.LockedBy != "" || got.LockUntilMs != 0 || got.PublishedAtMs != 0 || got.CreatedAtMs != 100 {
		t.Fatalf("failed row: %+v", got)
	}
	// The lease is gone: another relay may take it at once.
	b, err := s.ClaimPendingOutbox(ctx, "relay-b", 1100, 500, 10)
	mustNoErr(t, "claim b", err)
	wantIDs(t, "claim after a failure", eventIDs(b), ids)

	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, id, "network unreachable", 1200, 1200))
	got = getOutbox(t, s, id)
	if got.RetryCount != 2 || got.LastError != "network unreachable" || got.Status != persistence.OutboxPending {
		t.Fatalf("row after a second failure: %+v", got)
	}
	pending, err := s.ListPendingOutbox(ctx, 10)
	mustNoErr(t, "ListPendingOutbox", err)
	wantIDs(t, "a failed row stays in the pending scan", eventIDs(pending), ids)

	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, id, 1300))
	if got := getOutbox(t, s, id); got.LastError != "" || got.RetryCount != 2 {
		t.Fatalf("success must clear last_error and keep retry_count: %+v", got)
	}
}

func testReleaseOutbox(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200)
	_, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 10)
	mustNoErr(t, "claim", err)

	mustNoErr(t, "ReleaseOutbox", s.ReleaseOutbox(ctx, ids[0]))
	got := getOutbox(t, s, ids[0])
	if got.LockedBy != "" || got.LockUntilMs != 0 || got.RetryCount != 0 || got.Status != persistence.OutboxPending {
		t.Fatalf("released row: %+v", got)
	}
	if other := getOutbox(t, s, ids[1]); other.LockedBy != "relay-a" {
		t.Fatalf("release touched another row: %+v", other)
	}
	b, err := s.ClaimPendingOutbox(ctx, "relay-b", 1000, 500, 10)
	mustNoErr(t, "claim b", err)
	wantIDs(t, "claim after releasing one row of a held room", eventIDs(b), nil)
	mustNoErr(t, "ReleaseOutbox", s.ReleaseOutbox(ctx, ids[1]))
	b, err = s.ClaimPendingOutbox(ctx, "relay-b", 1000, 500, 10)
	mustNoErr(t, "claim b", err)
	wantIDs(t, "claim after releasing the room", eventIDs(b), ids)

	// Releasing a published row leaves it published.
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[1], 1100))
	before := getOutbox(t, s, ids[1])
	_ = s.ReleaseOutbox(ctx, ids[1]) // no-op or error: either way nothing changes
	if after := getOutbox(t, s, ids[1]); !reflect.DeepEqual(normRow(after), normRow(before)) {
		t.Fatalf("release changed a published row:\n got %+v\nwant %+v", after, before)
	}
}

// testReleaseOutboxBatch: a batch clears the leases of the pending rows it
// names and nothing else: a published row, a row it was not given and an
// unknown id are left alone, and an empty batch is a no-op.
func testReleaseOutboxBatch(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200, 300, 400)
	_, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 10)
	mustNoErr(t, "claim", err)
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[0], 1100))
	published := getOutbox(t, s, ids[0])

	mustNoErr(t, "ReleaseOutboxBatch", s.ReleaseOutboxBatch(ctx, []string{ids[0], ids[1], ids[2], "nope"}))
	if g := getOutbox(t, s, ids[0]); !reflect.DeepEqual(normRow(g), normRow(published)) {
		t.Fatalf("batch release changed a published row:\n got %+v\nwant %+v", g, published)
	}
	for _, id := range ids[1:3] {
		g := getOutbox(t, s, id)
		if g.Status != persistence.OutboxPending || g.LockedBy != "" || g.LockUntilMs != 0 || g.RetryCount != 0 {
			t.Fatalf("%s after batch release: %+v", id, g)
		}
	}
	if g := getOutbox(t, s, ids[3]); g.LockedBy != "relay-a" {
		t.Fatalf("batch released a row it was not given: %+v", g)
	}
	// ids[3] still holds the room: nothing of it is claimable yet.
	b, err := s.ClaimPendingOutbox(ctx, "relay-b", 1000, 500, 10)
	mustNoErr(t, "claim b", err)
	wantIDs(t, "claim while the room's last row is still leased", eventIDs(b), nil)
	mustNoErr(t, "empty batch", s.ReleaseOutboxBatch(ctx, nil))
	mustNoErr(t, "ReleaseOutboxBatch", s.ReleaseOutboxBatch(ctx, ids[3:]))
	b, err = s.ClaimPendingOutbox(ctx, "relay-b", 1000, 500, 10)
	mustNoErr(t, "claim b", err)
	wantIDs(t, "claim after releasing the room", eventIDs(b), ids[1:])
}

func testListOutboxFilter(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 300, 100, 200) // oldest first: 1, 2, 0
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[2], 400))
	for _, tc := range []struct {
		f    persistence.OutboxFilter
		want []string
	}{
		{persistence.OutboxFilter{Limit: 100}, []string{ids[1], ids[2], ids[0]}},
		{persistence.OutboxFilter{Limit: 2}, []string{ids[1], ids[2]}},
		{persistence.OutboxFilter{Status: persistence.OutboxPending, Limit: 10}, []string{ids[1], ids[0]}},
		{persistence.OutboxFilter{Status: persistence.OutboxPending, Limit: 1}, []string{ids[1]}},
		{persistence.OutboxFilter{Status: persistence.OutboxPublished, Limit: 10}, []string{ids[2]}},
	} {
		got, err := s.ListOutbox(ctx, tc.f)
		mustNoErr(t, "ListOutbox", err)
		wantIDs(t, fmt.Sprintf("ListOutbox(%+v)", tc.f), eventIDs(got), tc.want)
		for _, r := range got {
			if tc.f.Status != "" && r.Status != tc.f.Status {
				t.Fatalf("ListOutbox(%+v) returned a %s row", tc.f, r.Status)
			}
		}
	}
}

func testOutboxStats(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	want := func(what string, pending, oldest int64) {
		t.Helper()
		st, err := s.OutboxStats(ctx)
		mustNoErr(t, "OutboxStats", err)
		if st != (persistence.OutboxStats{Pending: pending, OldestCreatedAtMs: oldest}) {
			t.Fatalf("OutboxStats %s: got %+v, want pending %d oldest %d", what, st, pending, oldest)
		}
	}
	want("of an empty store", 0, 0)
	ids := seedOutbox(t, s, roomA, 300, 100, 200)
	want("with three pending", 3, 100)
	_, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 10)
	mustNoErr(t, "claim", err)
	want("with leased rows (still pending)", 3, 100)
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[1], 1000))
	want("after the oldest was published", 2, 200)
	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, ids[2], "boom", 1000, 1000))
	want("after a failure", 2, 200)
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[0], 1000))
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[2], 1000))
	want("after all were published", 0, 0)
}

// The claim unit is a room: numeric room_seq order (not event_id text), a
// failing earliest row holds back only its own room until it is due, and
// a room is handed out whole.
func testClaimRoomOrderAndDue(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	roomB := persistence.RoomKey{AppCode: "app1", RoomID: "room-b"}
	// Twelve events in one millisecond: event ids sort against room_seq.
	at := make([]int64, 12)
	for i := range at {
		at[i] = 100
	}
	a := seedOutbox(t, s, roomA, at...)
	b := seedOutbox(t, s, roomB, 150, 160)
	got, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 100)
	mustNoErr(t, "claim", err)
	wantIDs(t, "both rooms, each in room_seq order", eventIDs(got), append(slices.Clone(a), b...))

	// roomA's earliest row fails and waits until 5000; the rest of roomA
	// waits behind it, roomB flows.
	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, a[0], "im down", 1100, 5000))
	for _, id := range a[1:] {
		mustNoErr(t, "ReleaseOutbox", s.ReleaseOutbox(ctx, id))
	}
	mustNoErr(t, "MarkOutboxPublishedBatch", s.MarkOutboxPublishedBatch(ctx, b, 1100))
	more := seedOutbox(t, s, persistence.RoomKey{AppCode: "app1", RoomID: "room-c"}, 1200)
	got, err = s.ClaimPendingOutbox(ctx, "relay-b", 1300, 500, 100)
	mustNoErr(t, "claim before due", err)
	wantIDs(t, "before the due time only the other room", eventIDs(got), more)
	got, err = s.ClaimPendingOutbox(ctx, "relay-b", 5000, 500, 5)
	mustNoErr(t, "claim at due", err)
	wantIDs(t, "at the due time roomA comes back from its earliest row", eventIDs(got), a[:5])
}

// bigCommand appends one command of n events to key at seq, ids as
// room.EventID spells them (app:room:seq:index), whose text puts index 10
// before 2, and returns the ids in the command's order.
func bigCommand(t *testing.T, s persistence.Store, key persistence.RoomKey, seq int64, n int, at int64) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s:%s:%d:%d", key.AppCode, key.RoomID, seq, i)
	}
	mustAppend(t, s, persistence.Append{Command: command(key, seq, fmt.Sprintf("big-%d", seq), at, ids...)})
	return ids
}

// A command's events share its room_seq: a room's rows go out in the
// command's order (batch ban of 20, a full room closed), never in the
// order of their ids' text, through every claim size and every list.
func testManyEventsInIndexOrder(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	before := seedOutbox(t, s, roomA, 50)
	big := bigCommand(t, s, roomA, 2, 25, 100)
	after := command(roomA, 3, "after", 100, "z-after")
	mustAppend(t, s, persistence.Append{Command: after})
	all := slices.Concat(before, big, []string{"z-after"})
	for i, id := range big {
		if row := getOutbox(t, s, id); row.EventIndex != i {
			t.Fatalf("%s: EventIndex %d, want %d", id, row.EventIndex, i)
		}
	}

	got, err := s.ListPendingOutbox(ctx, 100)
	mustNoErr(t, "ListPendingOutbox", err)
	wantIDs(t, "ListPendingOutbox", eventIDs(got), all)
	got, err = s.ListPendingOutbox(ctx, 12)
	mustNoErr(t, "ListPendingOutbox(12)", err)
	wantIDs(t, "ListPendingOutbox(12) cuts the command after its 11th event", eventIDs(got), all[:12])
	got, err = s.ListOutbox(ctx, persistence.OutboxFilter{Limit: 7})
	mustNoErr(t, "ListOutbox", err)
	wantIDs(t, "ListOutbox(limit 7)", eventIDs(got), all[:7])
	got, err = s.ListOutbox(ctx, persistence.OutboxFilter{Status: persistence.OutboxPending, Limit: 15})
	mustNoErr(t, "ListOutbox(pending)", err)
	wantIDs(t, "ListOutbox(pending, limit 15)", eventIDs(got), all[:15])

	// Claims of every size walk the room in order: each takes the next
	// rows after what the previous one took (and marked), none skipped,
	// none repeated, a limit cutting the command anywhere.
	now := claimInSteps(t, all, []int{3, 1, 8, 2, 11, 100}, func(limit int, now int64) ([]string, error) {
		got, err := s.ClaimPendingOutbox(ctx, "relay-a", now, 500, limit)
		if err == nil {
			err = s.MarkOutboxPublishedBatch(ctx, eventIDs(got), now)
		}
		return eventIDs(got), err
	})

	// The room's own publisher catching up claims the same way.
	roomB := persistence.RoomKey{AppCode: "app1", RoomID: "room-b"}
	bigB := bigCommand(t, s, roomB, 7, 25, 200)
	got, err = s.ClaimRoomOutbox(ctx, roomB, "publisher", now, 500, 13)
	mustNoErr(t, "ClaimRoomOutbox", err)
	wantIDs(t, "ClaimRoomOutbox(13)", eventIDs(got), bigB[:13])
	mustNoErr(t, "ReleaseOutboxBatch", s.ReleaseOutboxBatch(ctx, eventIDs(got)))
	got, err = s.ClaimRoomOutbox(ctx, roomB, "publisher", now, 500, 100)
	mustNoErr(t, "ClaimRoomOutbox", err)
	wantIDs(t, "ClaimRoomOutbox(100)", eventIDs(got), bigB)
}

// claimInSteps claims and marks with each of limits in turn (claim does
// both, at now, one millisecond later each time) and checks that each
// claim took the next rows of all after what the previous ones took: none
// skipped, none repeated, in order, wherever a limit cut. It returns the
// next now.
func claimInSteps(t *testing.T, all []string, limits []int, claim func(limit int, now int64) ([]string, error)) int64 {
	t.Helper()
	var sent []string
	now := int64(1000)
	for _, limit := range limits {
		got, err := claim(limit, now)
		mustNoErr(t, "claim and mark", err)
		wantIDs(t, fmt.Sprintf("claim of %d after %d sent", limit, len(sent)), got, all[len(sent):min(len(all), len(sent)+limit)])
		sent = append(sent, got...)
		now++
	}
	wantIDs(t, "every row once, in order", sent, all)
	return now
}

// Rooms are claimed by the creation time of their oldest due free row,
// not by when that row came due nor by name: a room whose row failed and
// waited for its retry is served before rooms whose rows are younger but
// were due earlier. A store that walks rows by (next_retry_at_ms,
// event_id) serves x last here.
func testClaimOldestRoomFirst(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	roomX := persistence.RoomKey{AppCode: "app1", RoomID: "room-x"}
	roomY := persistence.RoomKey{AppCode: "app1", RoomID: "room-y"}
	roomZ := persistence.RoomKey{AppCode: "app1", RoomID: "room-z"}
	x := seedOutbox(t, s, roomX, 100)
	got, err := s.ClaimPendingOutbox(ctx, "relay-a", 150, 500, 10)
	mustNoErr(t, "first claim", err)
	wantIDs(t, "the only room", eventIDs(got), x)
	// x's send fails; it is due again at 400, after y and z were created.
	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, x[0], "im down", 160, 400))
	y := seedOutbox(t, s, roomY, 300)
	z := seedOutbox(t, s, roomZ, 200)
	got, err = s.ClaimPendingOutbox(ctx, "relay-b", 1000, 500, 1)
	mustNoErr(t, "claim one", err)
	wantIDs(t, "a claim of one row takes the oldest room", eventIDs(got), x)
	mustNoErr(t, "ReleaseOutbox", s.ReleaseOutbox(ctx, x[0]))
	got, err = s.ClaimPendingOutbox(ctx, "relay-b", 1000, 500, 10)
	mustNoErr(t, "claim all", err)
	wantIDs(t, "rooms oldest first", eventIDs(got), slices.Concat(x, z, y))
}

// Rows an append leases to the room's publisher are not claimed by a
// relay, nor is any earlier row of that room; ClaimRoomOutbox lets the
// owner itself take the room's earlier rows with them.
func testClaimInsertLease(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	early := seedOutbox(t, s, roomA, 100, 200) // written unleased: seq 1, 2
	lease := &persistence.OutboxLease{Owner: "room-a-publisher", UntilMs: 10_000}
	mustAppend(t, s, persistence.Append{Command: command(roomA, 3, "cmd-3", 300, "leased-3"), Lease: lease})
	if g := getOutbox(t, s, "leased-3"); g.LockedBy != lease.Owner || g.LockUntilMs != lease.UntilMs || g.NextRetryAtMs != 300 {
		t.Fatalf("row appended with a lease: %+v", g)
	}
	got, err := s.ClaimPendingOutbox(ctx, "relay", 1000, 500, 10)
	mustNoErr(t, "relay claim", err)
	wantIDs(t, "a relay does not take a room its publisher holds", eventIDs(got), nil)
	got, err = s.ClaimRoomOutbox(ctx, roomA, "someone-else", 1000, 500, 10)
	mustNoErr(t, "foreign room claim", err)
	wantIDs(t, "ClaimRoomOutbox of another owner", eventIDs(got), nil)
	got, err = s.ClaimRoomOutbox(ctx, roomA, lease.Owner, 1000, 500, 10)
	mustNoErr(t, "own room claim", err)
	wantIDs(t, "the publisher takes its room from the lowest row", eventIDs(got), append(slices.Clone(early), "leased-3"))
	if g := getOutbox(t, s, early[0]); g.LockedBy != lease.Owner || g.LockUntilMs != 1500 {
		t.Fatalf("row after ClaimRoomOutbox: %+v", g)
	}
	got, err = s.ClaimPendingOutbox(ctx, "relay", 1500, 500, 10)
	mustNoErr(t, "relay claim after expiry", err)
	wantIDs(t, "after the lease a relay takes the room", eventIDs(got), append(slices.Clone(early), "leased-3"))
}

// Parked rows leave the claims and release their room; requeue puts one
// back; skip records who, when and why; published rows refuse both.
func testParkRequeueSkip(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200, 300)
	_, err := s.ClaimPendingOutbox(ctx, "relay", 1000, 500, 10)
	mustNoErr(t, "claim", err)
	mustNoErr(t, "ParkOutbox", s.ParkOutbox(ctx, ids[0], "corrupt envelope", 1100))
	g := getOutbox(t, s, ids[0])
	if g.Status != persistence.OutboxParked || g.LastError != "corrupt envelope" || g.RetryCount != 1 || g.LockedBy != "" || g.LockUntilMs != 0 {
		t.Fatalf("parked row: %+v", g)
	}
	for _, id := range ids[1:] {
		mustNoErr(t, "ReleaseOutbox", s.ReleaseOutbox(ctx, id))
	}
	got, err := s.ClaimPendingOutbox(ctx, "relay", 1100, 500, 10)
	mustNoErr(t, "claim after park", err)
	wantIDs(t, "a parked row releases its room", eventIDs(got), ids[1:])
	if st, err := s.OutboxStats(ctx); err != nil || st.Parked != 1 || st.Pending != 2 {
		t.Fatalf("stats with a parked row: %+v %v", st, err)
	}
	parked, err := s.ListOutbox(ctx, persistence.OutboxFilter{Status: persistence.OutboxParked, Limit: 10})
	mustNoErr(t, "ListOutbox parked", err)
	wantIDs(t, "list --status parked", eventIDs(parked), ids[:1])
	mustNoErr(t, "MarkOutboxPublished of a parked row", s.MarkOutboxPublished(ctx, ids[0], 1150))
	mustNoErr(t, "MarkOutboxFailed of a parked row", s.MarkOutboxFailed(ctx, ids[0], "late", 1150, 1150))
	if g := getOutbox(t, s, ids[0]); g.Status != persistence.OutboxParked || g.RetryCount != 1 {
		t.Fatalf("a late mark changed a parked row: %+v", g)
	}

	mustNoErr(t, "RequeueOutbox", s.RequeueOutbox(ctx, ids[0], 1200))
	g = getOutbox(t, s, ids[0])
	if g.Status != persistence.OutboxPending || g.NextRetryAtMs != 1200 || g.LockedBy != "" {
		t.Fatalf("requeued row: %+v", g)
	}
	mustNoErr(t, "ParkOutbox", s.ParkOutbox(ctx, ids[0], "still corrupt", 1300))
	mustNoErr(t, "SkipOutbox", s.SkipOutbox(ctx, ids[0], "ops:alice", "payload lost, room re-synced", 1400))
	g = getOutbox(t, s, ids[0])
	if g.Status != persistence.OutboxSkipped || g.ResolvedBy != "ops:alice" || g.ResolvedAtMs != 1400 || g.Resolution != "payload lost, room re-synced" {
		t.Fatalf("skipped row: %+v", g)
	}
	mustNoErr(t, "SkipOutbox again", s.SkipOutbox(ctx, ids[0], "ops:bob", "again", 1500))
	if again := getOutbox(t, s, ids[0]); again.ResolvedBy != "ops:alice" {
		t.Fatalf("a second skip rewrote the record: %+v", again)
	}
	wantIs(t, "RequeueOutbox of a skipped row", s.RequeueOutbox(ctx, ids[0], 1600), persistence.ErrConflict)
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[1], 1600))
	wantIs(t, "RequeueOutbox of a published row", s.RequeueOutbox(ctx, ids[1], 1700), persistence.ErrConflict)
	wantIs(t, "SkipOutbox of a published row", s.SkipOutbox(ctx, ids[1], "ops", "x", 1700), persistence.ErrConflict)
	wantIs(t, "ParkOutbox unknown", s.ParkOutbox(ctx, "missing", "x", 1), persistence.ErrNotFound)
	wantIs(t, "RequeueOutbox unknown", s.RequeueOutbox(ctx, "missing", 1), persistence.ErrNotFound)
	wantIs(t, "SkipOutbox unknown", s.SkipOutbox(ctx, "missing", "ops", "x", 1), persistence.ErrNotFound)
}

// testEffectsDone: the effect steps a sender records stay with the row,
// added to the ones already there, through every claim, failure, release,
// park and requeue, so a sender retrying the row (another process, its
// memory gone) reads them; recording touches nothing else of the row.
func testEffectsDone(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100, 200)
	if g := getOutbox(t, s, ids[0]); g.EffectsDone != 0 {
		t.Fatalf("a new row has effects done %b, want none", g.EffectsDone)
	}
	claimed, err := s.ClaimPendingOutbox(ctx, "relay-a", 1000, 500, 10)
	mustNoErr(t, "claim", err)
	wantIDs(t, "claim", eventIDs(claimed), ids)
	before := getOutbox(t, s, ids[0])

	mustNoErr(t, "MarkOutboxEffectsDone 1", s.MarkOutboxEffectsDone(ctx, ids[0], 1))
	mustNoErr(t, "MarkOutboxEffectsDone 4", s.MarkOutboxEffectsDone(ctx, ids[0], 4))
	mustNoErr(t, "MarkOutboxEffectsDone 1 again", s.MarkOutboxEffectsDone(ctx, ids[0], 1))
	after := getOutbox(t, s, ids[0])
	if after.EffectsDone != 5 {
		t.Fatalf("effects done %b, want 101 (the two steps recorded, none lost)", after.EffectsDone)
	}
	after.EffectsDone = before.EffectsDone
	if !reflect.DeepEqual(normRow(after), normRow(before)) {
		t.Fatalf("recording a step changed the row:\n got %+v\nwant %+v", after, before)
	}
	if g := getOutbox(t, s, ids[1]); g.EffectsDone != 0 {
		t.Fatalf("another row got effects done %b", g.EffectsDone)
	}

	// The lease moves on (a failure, a release, a stop): whoever claims
	// the row next reads the steps.
	mustNoErr(t, "MarkOutboxFailed", s.MarkOutboxFailed(ctx, ids[0], "trtc down", 1100, 1200))
	mustNoErr(t, "ReleaseOutbox", s.ReleaseOutbox(ctx, ids[1]))
	claimed, err = s.ClaimPendingOutbox(ctx, "relay-b", 1200, 500, 10)
	mustNoErr(t, "claim by another relay", err)
	wantIDs(t, "claim by another relay", eventIDs(claimed), ids)
	if claimed[0].EffectsDone != 5 || claimed[1].EffectsDone != 0 {
		t.Fatalf("claimed rows carry effects done %b, %b; want 101, 0", claimed[0].EffectsDone, claimed[1].EffectsDone)
	}
	mustNoErr(t, "ReleaseOutboxBatch", s.ReleaseOutboxBatch(ctx, ids))
	room, err := s.ClaimRoomOutbox(ctx, roomA, "room-publisher", 1300, 500, 10)
	mustNoErr(t, "ClaimRoomOutbox", err)
	if len(room) != 2 || room[0].EffectsDone != 5 {
		t.Fatalf("the room's own claim: %+v", room)
	}

	// Parked and requeued, the steps stay done; a step recorded on a
	// parked row too.
	mustNoErr(t, "ParkOutbox", s.ParkOutbox(ctx, ids[0], "refused", 1400))
	mustNoErr(t, "MarkOutboxEffectsDone on a parked row", s.MarkOutboxEffectsDone(ctx, ids[0], 2))
	mustNoErr(t, "RequeueOutbox", s.RequeueOutbox(ctx, ids[0], 1500))
	if g := getOutbox(t, s, ids[0]); g.EffectsDone != 7 || g.Status != persistence.OutboxPending {
		t.Fatalf("requeued row: status %s, effects done %b; want pending, 111", g.Status, g.EffectsDone)
	}
	listed, err := s.ListOutbox(ctx, persistence.OutboxFilter{Status: persistence.OutboxPending})
	mustNoErr(t, "ListOutbox", err)
	if len(listed) != 2 || listed[0].EffectsDone != 7 {
		t.Fatalf("listed rows: %+v", listed)
	}

	// Published, the row keeps them (operators see what was done).
	mustNoErr(t, "MarkOutboxPublished", s.MarkOutboxPublished(ctx, ids[0], 1600))
	if g := getOutbox(t, s, ids[0]); g.EffectsDone != 7 || g.Status != persistence.OutboxPublished {
		t.Fatalf("published row: %+v", g)
	}
	mustNoErr(t, "MarkOutboxEffectsDone on a published row", s.MarkOutboxEffectsDone(ctx, ids[0], 8))
	if g := getOutbox(t, s, ids[0]); g.EffectsDone != 15 || g.Status != persistence.OutboxPublished || g.PublishedAtMs != 1600 {
		t.Fatalf("a step recorded late on a published row: %+v", g)
	}

	wantIs(t, "MarkOutboxEffectsDone of an unknown event", s.MarkOutboxEffectsDone(ctx, "no-such-event", 1), persistence.ErrNotFound)
}

// testEffectsDoneConcurrent: steps recorded at once by several callers
// (a sender and a late one whose lease passed) are all kept: the store
// adds bits, it never writes a mask it read before.
func testEffectsDoneConcurrent(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	ids := seedOutbox(t, s, roomA, 100)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for bit := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.MarkOutboxEffectsDone(ctx, ids[0], 1<<bit)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustNoErr(t, "MarkOutboxEffectsDone", err)
	}
	if g := getOutbox(t, s, ids[0]); g.EffectsDone != 0xFFFFFFFF {
		t.Fatalf("effects done %032b after 32 concurrent steps, want all", g.EffectsDone)
	}
}

// claimLedger records which owner each concurrent claim gave a row and a
// room to.
type claimLedger struct {
	byID   map[string]string // event_id -> owner
	byRoom map[string]string // room -> owner
}

func newClaimLedger() claimLedger {
	return claimLedger{byID: map[string]string{}, byRoom: map[string]string{}}
}

// record notes owner's claim of row id of room and returns what it breaks:
// a row claimed twice, or a room with rows under two owners.
func (l claimLedger) record(owner, id, room string) []error {
	var errs []error
	if prev, dup := l.byID[id]; dup {
		errs = append(errs, fmt.Errorf("%s claimed by %s and %s", id, prev, owner))
	}
	if prev, ok := l.byRoom[room]; ok && prev != owner {
		errs = append(errs, fmt.Errorf("room %s has rows under %s and %s", room, prev, owner))
	}
	l.byID[id], l.byRoom[room] = owner, owner
	return errs
}
