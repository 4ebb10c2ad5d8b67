package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hyapp/roomcell/room"

	"github.com/hyapp/roomcell/persistence"
)

// RetentionStores is one backend's set of stores for RunRetention: each
// must implement persistence.Purger, and Notice also
// persistence.ConsumerPositions.
type RetentionStores struct {
	Room   persistence.Store
	Wallet persistence.WalletStore
	Notice persistence.NoticeStore
	// RoomMQ is a room store opened with the room_outbox MQ fanout on
	// (new rows wait for it): the rule that retention never deletes a row
	// the fanout has still to publish.
	RoomMQ persistence.Store
}

// RunRetention is the contract of the retention rules: what
// each table's purge deletes, and above all what it never deletes.
func RunRetention(t *testing.T, newStores func(t *testing.T) RetentionStores) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s RetentionStores)
	}{
		{"OutboxPublishedOnly", testPurgeOutboxRules},
		{"OutboxNeverUndelivered", testPurgeOutboxNeverUndelivered},
		{"OutboxKicksWaitForNoticeCursor", testPurgeOutboxKicks},
		{"OutboxBatchesResume", testPurgeOutboxBatches},
		{"OutboxWaitsForMQFanout", testPurgeOutboxWaitsForMQ},
		{"CommandLogBelowSnapshotOnly", testPurgeCommandLog},
		{"CommandLogBatchesAcrossRooms", testPurgeCommandLogBatches},
		{"WalletOutboxBehindCursorOnly", testPurgeWalletOutbox},
		{"NoticesDeliveredOnly", testPurgeNotices},
		{"BadRequestsChangeNothing", testPurgeBadRequests},
		{"LeaseOneOwnerAtATime", testPurgeLease},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStores(t)) })
	}
}

const (
	rtT0   = int64(1_790_000_000_000) // every time in this suite is relative to it
	rtHour = int64(3_600_000)
)

func purger(t *testing.T, s any) persistence.Purger {
	t.Helper()
	p, ok := s.(persistence.Purger)
	if !ok {
		t.Fatalf("%T does not implement persistence.Purger", s)
	}
	return p
}

// purgeAll runs batches of limit rows until the walk is done and returns
// the rows deleted; it fails the test if the walk does not end.
func purgeAll(t *testing.T, p persistence.Purger, r persistence.PurgeRequest) int {
	t.Helper()
	total := 0
	for i := 0; i < 10_000; i++ {
		res, err := p.Purge(t.Context(), r)
		mustNoErr(t, "Purge "+r.Table, err)
		if res.Rows > r.Limit {
			t.Fatalf("Purge %s deleted %d rows in a batch of %d", r.Table, res.Rows, r.Limit)
		}
		total += res.Rows
		if res.Done {
			return total
		}
		r.After = res.Next
	}
	t.Fatalf("Purge %s: walk did not end", r.Table)
	return 0
}

func countPurgeable(t *testing.T, p persistence.Purger, r persistence.PurgeRequest) int64 {
	t.Helper()
	r.Limit = persistence.MaxPurgeCount
	n, err := p.CountPurgeable(t.Context(), r)
	mustNoErr(t, "CountPurgeable "+r.Table, err)
	return n
}

func outboxExists(t *testing.T, s persistence.Store, id string) bool {
	t.Helper()
	_, err := s.GetOutbox(t.Context(), id)
	if errors.Is(err, persistence.ErrNotFound) {
		return false
	}
	mustNoErr(t, "GetOutbox "+id, err)
	return true
}

// appendEvents appends one command per (eventType, createdAt) in room key,
// seq from 1, and returns the event ids.
func appendEvents(t *testing.T, s persistence.Store, key persistence.RoomKey, types []string, createdAts []int64) []string {
	t.Helper()
	ids := make([]string, len(createdAts))
	for i, at := range createdAts {
		seq := int64(i + 1)
		ids[i] = fmt.Sprintf("%s-e%03d", key.RoomID, seq)
		c := command(key, seq, fmt.Sprintf("%s-c%03d", key.RoomID, seq), at, ids[i])
		c.Events[0].EventType = types[i]
		mustAppend(t, s, persistence.Append{Command: c})
	}
	return ids
}

func testPurgeOutboxRules(t *testing.T, s RetentionStores) {
	p := purger(t, s.Room)
	key := persistence.RoomKey{AppCode: "lalu", RoomID: "r-out"}
	old, recent := rtT0-100*rtHour, rtT0-rtHour
	types := slices.Repeat([]string{"RoomUserJoined"}, 6)
	// 0: old, published long ago → goes. 1: old, never published → stays
	// (pending is never purged, whatever its age). 2: old, published just
	// now (after a long outage) → stays until its publication is old.
	// 3: recent, published → stays. 4: old, published old → goes. 5: old,
	// parked for an operator → stays.
	ids := appendEvents(t, s.Room, key, types, []int64{old, old + 1, old + 2, recent, old + 3, old + 4})
	ctx := t.Context()
	mustNoErr(t, "mark", s.Room.MarkOutboxPublished(ctx, ids[0], old+10))
	mustNoErr(t, "mark", s.Room.MarkOutboxPublished(ctx, ids[2], rtT0-1))
	mustNoErr(t, "mark", s.Room.MarkOutboxPublished(ctx, ids[3], recent+10))
	mustNoErr(t, "mark", s.Room.MarkOutboxPublished(ctx, ids[4], old+20))
	// A pending row that failed many times is still pending.
	mustNoErr(t, "fail", s.Room.MarkOutboxFailed(ctx, ids[1], "boom", old+30, old+31))
	mustNoErr(t, "park", s.Room.ParkOutbox(ctx, ids[5], "never deliverable", old+40))
	// Effect steps recorded change nothing: the published row goes, the
	// pending one stays with its steps.
	mustNoErr(t, "effects done", s.Room.MarkOutboxEffectsDone(ctx, ids[0], 3))
	mustNoErr(t, "effects done", s.Room.MarkOutboxEffectsDone(ctx, ids[1], 1))

	r := persistence.PurgeRequest{Table: persistence.PurgeRoomOutbox, CutoffMs: rtT0 - 72*rtHour, Limit: 100}
	if n := countPurgeable(t, p, r); n != 2 {
		t.Fatalf("dry run counts %d rows, want 2", n)
	}
	for _, id := range ids {
		if !outboxExists(t, s.Room, id) {
			t.Fatalf("dry run deleted %s", id)
		}
	}
	if n := purgeAll(t, p, r); n != 2 {
		t.Fatalf("purge deleted %d rows, want 2", n)
	}
	for i, want := range []bool{false, true, true, true, false, true} {
		if got := outboxExists(t, s.Room, ids[i]); got != want {
			t.Fatalf("row %d (%s) exists=%v after purge, want %v", i, ids[i], got, want)
		}
	}
	if row := getOutbox(t, s.Room, ids[5]); row.Status != persistence.OutboxParked {
		t.Fatalf("parked row changed by purge: %+v", row)
	}
	if row := getOutbox(t, s.Room, ids[1]); row.Status != persistence.OutboxPending || row.RetryCount != 1 || row.EffectsDone != 1 {
		t.Fatalf("pending row changed by purge: %+v", row)
	}
	pending, err := s.Room.ListPendingOutbox(ctx, 10)
	mustNoErr(t, "ListPendingOutbox", err)
	wantIDs(t, "pending after purge", eventIDs(pending), []string{ids[1]})
	if n := purgeAll(t, p, r); n != 0 {
		t.Fatalf("second purge deleted %d rows, want 0", n)
	}
	ret, err := p.TableRetention(ctx, persistence.PurgeRoomOutbox)
	mustNoErr(t, "TableRetention", err)
	if ret.OldestCreatedAtMs != old+1 {
		t.Fatalf("oldest retained row at %d, want %d", ret.OldestCreatedAtMs, old+1)
	}
}

// Rows delivered in a run from the room's first (published by the
// relay's batch marks) and after a gap go; the failed row between them and
// the rows after it stay pending, come back in room order, and their own
// marks later are recent, so they stay.
func testPurgeOutboxNeverUndelivered(t *testing.T, s RetentionStores) {
	p := purger(t, s.Room)
	ctx := t.Context()
	key := persistence.RoomKey{AppCode: "lalu", RoomID: "r-run"}
	old := rtT0 - 100*rtHour
	ids := appendEvents(t, s.Room, key, slices.Repeat([]string{"RoomUserJoined"}, 6), []int64{old, old + 1, old + 2, old + 3, old + 4, old + 5})
	_, err := s.Room.ClaimPendingOutbox(ctx, "relay", old+5, 3_600_000, 10)
	mustNoErr(t, "claim", err)
	mustNoErr(t, "fail", s.Room.MarkOutboxFailed(ctx, ids[2], "im down", old+10, old+20))
	mustNoErr(t, "release", s.Room.ReleaseOutboxBatch(ctx, ids[3:]))
	mustNoErr(t, "mark", s.Room.MarkOutboxPublishedBatch(ctx, []string{ids[0], ids[1], ids[4]}, old+10))
	r := persistence.PurgeRequest{Table: persistence.PurgeRoomOutbox, CutoffMs: rtT0 - 72*rtHour, Limit: 2}
	if n := countPurgeable(t, p, r); n != 3 {
		t.Fatalf("dry run counts %d rows, want the 3 delivered", n)
	}
	if n := purgeAll(t, p, r); n != 3 {
		t.Fatalf("purge deleted %d rows, want the 3 delivered", n)
	}
	for i, want := range []bool{false, false, true, true, false, true} {
		if got := outboxExists(t, s.Room, ids[i]); got != want {
			t.Fatalf("row %d (%s) exists=%v after purge, want %v", i, ids[i], got, want)
		}
	}
	for _, i := range []int{2, 3, 5} {
		if g := getOutbox(t, s.Room, ids[i]); g.Status != persistence.OutboxPending {
			t.Fatalf("undelivered row %s after purge: %+v", ids[i], g)
		}
	}
	got, err := s.Room.ClaimPendingOutbox(ctx, "relay-2", old+20, 3_600_000, 10)
	mustNoErr(t, "claim after purge", err)
	wantIDs(t, "the undelivered rows in room order", eventIDs(got), []string{ids[2], ids[3], ids[5]})
	mustNoErr(t, "mark", s.Room.MarkOutboxPublishedBatch(ctx, eventIDs(got), rtT0-1))
	if n := purgeAll(t, p, r); n != 0 {
		t.Fatalf("purge deleted %d rows published just now, want 0", n)
	}
	for _, i := range []int{2, 3, 5} {
		if g := getOutbox(t, s.Room, ids[i]); g.Status != persistence.OutboxPublished || g.PublishedAtMs != rtT0-1 {
			t.Fatalf("row %s after its mark: %+v", ids[i], g)
		}
	}
}

// A row IM published long ago stays while the MQ fanout has not
// published it (a NATS outage longer than the retention window), and goes
// once it has; a row the fanout parked does not hold retention.
func testPurgeOutboxWaitsForMQ(t *testing.T, s RetentionStores) {
	if s.RoomMQ == nil {
		t.Fatal("RetentionStores.RoomMQ is required")
	}
	p := purger(t, s.RoomMQ)
	ctx := t.Context()
	key := persistence.RoomKey{AppCode: "lalu", RoomID: "r-mq"}
	old := rtT0 - 100*rtHour
	ids := appendEvents(t, s.RoomMQ, key, slices.Repeat([]string{"RoomUserJoined"}, 3), []int64{old, old + 1, old + 2})
	for _, id := range ids {
		mustNoErr(t, "mark", s.RoomMQ.MarkOutboxPublished(ctx, id, old+10))
	}
	r := persistence.PurgeRequest{Table: persistence.PurgeRoomOutbox, CutoffMs: rtT0 - 72*rtHour, Limit: 100}
	if n := countPurgeable(t, p, r); n != 0 {
		t.Fatalf("dry run counts %d rows the MQ fanout has not published, want 0", n)
	}
	if n := purgeAll(t, p, r); n != 0 {
		t.Fatalf("purge deleted %d rows the MQ fanout has not published", n)
	}
	mustNoErr(t, "mq published", s.RoomMQ.MarkOutboxMQPublished(ctx, ids[:1], old+20))
	mustNoErr(t, "mq park", s.RoomMQ.ParkOutboxMQ(ctx, ids[1]))
	if n := countPurgeable(t, p, r); n != 2 {
		t.Fatalf("dry run counts %d rows, want the MQ-published and the MQ-parked one", n)
	}
	if n := purgeAll(t, p, r); n != 2 {
		t.Fatalf("purge deleted %d rows, want 2", n)
	}
	for i, want := range []bool{false, false, true} {
		if got := outboxExists(t, s.RoomMQ, ids[i]); got != want {
			t.Fatalf("row %d exists=%v after purge, want %v", i, got, want)
		}
	}
	if row := getOutbox(t, s.RoomMQ, ids[2]); row.MQStatus != persistence.OutboxMQPending || row.Status != persistence.OutboxPublished {
		t.Fatalf("kept row changed by purge: %+v", row)
	}
}

func testPurgeOutboxKicks(t *testing.T, s RetentionStores) {
	p := purger(t, s.Room)
	key := persistence.RoomKey{AppCode: "lalu", RoomID: "r-kick"}
	old := rtT0 - 100*rtHour
	k := room.TypeRoomUserKicked
	types := []string{k, "RoomUserJoined", k, k}
	ids := appendEvents(t, s.Room, key, types, []int64{old, old, old + 5, old + 9})
	for _, id := range ids {
		mustNoErr(t, "mark", s.Room.MarkOutboxPublished(t.Context(), id, old+10))
	}
	r := persistence.PurgeRequest{Table: persistence.PurgeRoomOutbox, CutoffMs: rtT0 - 72*rtHour, Limit: 100}
	// No room notice cursor: the notice worker has read nothing yet, so
	// no kick may go; the other events may.
	if n := purgeAll(t, p, r); n != 1 || outboxExists(t, s.Room, ids[1]) {
		t.Fatalf("without a cursor: deleted %d, want only the join", n)
	}
	// The cursor has passed the second kick (created old+5) but not the
	// third.
	r.Consumer = persistence.ConsumerPosition{Num: old + 5, Key: ids[2], Found: true}
	if n := countPurgeable(t, p, r); n != 2 {
		t.Fatalf("dry run with cursor counts %d, want 2", n)
	}
	if n := purgeAll(t, p, r); n != 2 {
		t.Fatalf("with cursor: deleted %d, want 2", n)
	}
	for i, want := range []bool{false, false, false, true} {
		if got := outboxExists(t, s.Room, ids[i]); got != want {
			t.Fatalf("kick %d exists=%v, want %v", i, got, want)
		}
	}
}

func testPurgeOutboxBatches(t *testing.T, s RetentionStores) {
	p := purger(t, s.Room)
	key := persistence.RoomKey{AppCode: "lalu", RoomID: "r-batch"}
	const n = 25
	types := slices.Repeat([]string{"RoomUserJoined"}, n)
	ats := make([]int64, n)
	for i := range ats {
		ats[i] = rtT0 - 100*rtHour + int64(i)
	}
	ids := appendEvents(t, s.Room, key, types, ats)
	// Every third row stays pending: the batches must walk past them.
	var published []string
	for i, id := range ids {
		if i%3 != 0 {
			mustNoErr(t, "mark", s.Room.MarkOutboxPublished(t.Context(), id, ats[i]+1))
			published = append(published, id)
		}
	}
	r := persistence.PurgeRequest{Table: persistence.PurgeRoomOutbox, CutoffMs: rtT0, Limit: 4}
	batches := 0
	total := 0
	for {
		res, err := p.Purge(t.Context(), r)
		mustNoErr(t, "Purge", err)
		if res.Rows > r.Limit {
			t.Fatalf("batch deleted %d > limit %d", res.Rows, r.Limit)
		}
		total += res.Rows
		batches++
		if res.Done || batches > 50 {
			break
		}
		r.After = res.Next
	}
	if total != len(published) || batches < len(published)/r.Limit {
		t.Fatalf("deleted %d rows in %d batches, want %d rows in at least %d", total, batches, len(published), len(published)/r.Limit)
	}
	for i, id := range ids {
		if got, want := outboxExists(t, s.Room, id), i%3 == 0; got != want {
			t.Fatalf("row %d exists=%v, want %v", i, got, want)
		}
	}
}

// seedLog appends commands 1..n of key, created an hour apart ending at
// last, one event each, all published, with a snapshot at snapSeq (0 =
// none).
func seedLog(t *testing.T, s persistence.Store, key persistence.RoomKey, n int, last, snapSeq int64) {
	t.Helper()
	for i := 1; i <= n; i++ {
		seq := int64(i)
		at := last - int64(n-i)*rtHour
		c := command(key, seq, fmt.Sprintf("%s-cmd-%d", key.RoomID, seq), at, fmt.Sprintf("%s-ev-%d", key.RoomID, seq))
		a := persistence.Append{Command: c}
		if seq == snapSeq {
			a.Snapshot = snapshot(key, seq, at)
		}
		mustAppend(t, s, a)
		mustNoErr(t, "mark", s.MarkOutboxPublished(t.Context(), c.Events[0].EventID, at))
	}
}

func testPurgeCommandLog(t *testing.T, s RetentionStores) {
	p := purger(t, s.Room)
	ctx := t.Context()
	cutoff := rtT0 - 7*24*rtHour
	a := persistence.RoomKey{AppCode: "lalu", RoomID: "r-a"} // old log, snapshot at 5 of 10
	b := persistence.RoomKey{AppCode: "lalu", RoomID: "r-b"} // old log, no snapshot
	c := persistence.RoomKey{AppCode: "lalu", RoomID: "r-c"} // snapshot at the end, log inside the window
	d := persistence.RoomKey{AppCode: "lalu", RoomID: "r-d"} // snapshot at 8 of 8, half the log inside the window
	seedLog(t, s.Room, a, 10, cutoff-100*rtHour, 5)
	seedLog(t, s.Room, b, 6, cutoff-100*rtHour, 0)
	seedLog(t, s.Room, c, 4, rtT0, 4)
	seedLog(t, s.Room, d, 8, cutoff+3*rtHour, 8) // rows 1..4 before the cutoff (cutoff-4h..cutoff-1h)

	r := persistence.PurgeRequest{Table: persistence.PurgeCommandLog, CutoffMs: cutoff, Limit: 100}
	if n := countPurgeable(t, p, r); n != 9 {
		t.Fatalf("dry run counts %d, want 9 (5 of r-a, 4 of r-d)", n)
	}
	if n := purgeAll(t, p, r); n != 9 {
		t.Fatalf("purge deleted %d, want 9", n)
	}
	for _, tc := range []struct {
		key   persistence.RoomKey
		after int64
		want  []int64
	}{
		{a, 0, []int64{6, 7, 8, 9, 10}},
		{b, 0, []int64{1, 2, 3, 4, 5, 6}},
		{c, 0, []int64{1, 2, 3, 4}},
		{d, 0, []int64{5, 6, 7, 8}},
	} {
		recs, err := s.Room.LoadCommands(ctx, tc.key, tc.after)
		mustNoErr(t, "LoadCommands", err)
		if got := seqs(recs); !slices.Equal(got, tc.want) {
			t.Fatalf("%s log after purge = %v, want %v", tc.key, got, tc.want)
		}
	}
	// The latest snapshot and everything after it are intact: recovery
	// (snapshot + commands after it) reads the same as before.
	snap, err := s.Room.LoadSnapshot(ctx, a)
	mustNoErr(t, "LoadSnapshot", err)
	wantSnapshot(t, "snapshot of r-a", snap, snapshot(a, 5, cutoff-105*rtHour))
	after, err := s.Room.LoadCommands(ctx, a, snap.Seq)
	mustNoErr(t, "LoadCommands after snapshot", err)
	if got := seqs(after); !slices.Equal(got, []int64{6, 7, 8, 9, 10}) {
		t.Fatalf("commands after the snapshot = %v", got)
	}
	// Past the idempotency window a purged command id is no longer known;
	// a kept one still is.
	_, err = s.Room.FindCommand(ctx, a, "r-a-cmd-1")
	wantIs(t, "FindCommand of a purged command", err, persistence.ErrNotFound)
	kept, err := s.Room.FindCommand(ctx, a, "r-a-cmd-6")
	mustNoErr(t, "FindCommand of a kept command", err)
	if kept.Seq != 6 {
		t.Fatalf("FindCommand r-a-cmd-6 = seq %d", kept.Seq)
	}
	// The room goes on: the next seq appends as before.
	mustAppend(t, s.Room, persistence.Append{Command: command(a, 11, "r-a-cmd-11", rtT0, "r-a-ev-11")})
	// Outbox rows are another table's business: the purge of the log left
	// them alone.
	if !outboxExists(t, s.Room, "r-a-ev-1") {
		t.Fatalf("command log purge deleted an outbox row")
	}
	ret, err := p.TableRetention(ctx, persistence.PurgeCommandLog)
	mustNoErr(t, "TableRetention", err)
	if want := cutoff - 105*rtHour; ret.OldestCreatedAtMs != want { // r-b's first row
		t.Fatalf("oldest retained log row at %d, want %d", ret.OldestCreatedAtMs, want)
	}
}

func testPurgeCommandLogBatches(t *testing.T, s RetentionStores) {
	p := purger(t, s.Room)
	cutoff := rtT0 - 7*24*rtHour
	want := 0
	for i := range 7 {
		key := persistence.RoomKey{AppCode: "lalu", RoomID: fmt.Sprintf("r-%02d", i)}
		seedLog(t, s.Room, key, 5, cutoff-10*rtHour, int64(i%5+1))
		want += i%5 + 1
	}
	r := persistence.PurgeRequest{Table: persistence.PurgeCommandLog, CutoffMs: cutoff, Limit: 3}
	if n := purgeAll(t, p, r); n != want {
		t.Fatalf("batches of 3 deleted %d, want %d", n, want)
	}
	for i := range 7 {
		key := persistence.RoomKey{AppCode: "lalu", RoomID: fmt.Sprintf("r-%02d", i)}
		recs, err := s.Room.LoadCommands(t.Context(), key, 0)
		mustNoErr(t, "LoadCommands", err)
		if len(recs) != 5-(i%5+1) || len(recs) > 0 && recs[0].Seq != int64(i%5+2) {
			t.Fatalf("%s keeps %v", key, seqs(recs))
		}
	}
}

// setCursor stores source's notice cursor at c.
func setCursor(t *testing.T, s persistence.NoticeStore, source string, c persistence.NoticeCursor) {
	t.Helper()
	_, held, err := s.ClaimCursor(t.Context(), source, "scanner", rtT0, 60_000)
	mustNoErr(t, "ClaimCursor", err)
	if !held {
		t.Fatalf("cursor %s not held", source)
	}
	mustNoErr(t, "SaveCursor", s.SaveCursor(t.Context(), source, "scanner", c, rtT0))
}

func consumer(t *testing.T, s persistence.NoticeStore, source string) persistence.ConsumerPosition {
	t.Helper()
	cp, ok := s.(persistence.ConsumerPositions)
	if !ok {
		t.Fatalf("%T does not implement persistence.ConsumerPositions", s)
	}
	pos, err := cp.ConsumerPosition(t.Context(), source)
	mustNoErr(t, "ConsumerPosition", err)
	return pos
}

const (
	rtWalletApp = "lalu"
	rtAsset     = "COIN"
)

// rtCredit writes one wallet transaction crediting amount to user at
// nowMs: an account change, its ledger entry and its WalletBalanceChanged
// outbox row, as the wallet service would.
func rtCredit(t *testing.T, s persistence.WalletStore, cmd, user string, amount, nowMs int64) {
	t.Helper()
	key := persistence.AccountKey{AppCode: rtWalletApp, UserID: user, AssetType: rtAsset}
	txID := "tx-" + cmd
	_, err := s.Exec(t.Context(), persistence.WalletTx{AppCode: rtWalletApp, CommandID: cmd, Lock: []persistence.AccountKey{key},
		Decide: func(v persistence.WalletView) (persistence.WalletPlan, error) {
			old := v.Accounts[key]
			acc := old
			acc.AppCode, acc.UserID, acc.AssetType = key.AppCode, key.UserID, key.AssetType
			acc.Available += amount
			acc.BalanceVersion++
			acc.UpdatedAtMs = nowMs
			return persistence.WalletPlan{
				Record: persistence.WalletTxRecord{TransactionID: txID, AppCode: rtWalletApp, CommandID: cmd, Kind: "credit",
					Fingerprint: "credit:" + user, Result: []byte(`{"ok":true}`), CreatedAtMs: nowMs},
				Accounts: []persistence.Account{acc},
				Ledger: []persistence.LedgerEntry{{TransactionID: txID, CommandID: cmd, AppCode: rtWalletApp, UserID: user, AssetType: rtAsset,
					AvailableDelta: amount, AvailableAfter: acc.Available, BalanceVersion: acc.BalanceVersion, CreatedAtMs: nowMs}},
				Outbox: []persistence.WalletOutboxEvent{{EventID: persistence.BalanceEventID(txID, user, rtAsset), AppCode: rtWalletApp,
					UserID: user, EventType: persistence.EventBalanceChanged, Payload: []byte(`{"v":1}`)}},
				NowMs: nowMs,
			}, nil
		}})
	mustNoErr(t, "wallet Exec "+cmd, err)
}

func rtOutbox(t *testing.T, s persistence.WalletStore) []persistence.WalletOutboxRecord {
	t.Helper()
	rows, err := s.ListOutboxAfter(t.Context(), 0, 1000)
	mustNoErr(t, "ListOutboxAfter", err)
	return rows
}

func testPurgeWalletOutbox(t *testing.T, s RetentionStores) {
	p := purger(t, s.Wallet)
	// Rows 1..6 are 100h old, 7..8 new.
	for i := 1; i <= 6; i++ {
		rtCredit(t, s.Wallet, fmt.Sprintf("c%d", i), "u1", 10, rtT0-100*rtHour+int64(i))
	}
	for i := 7; i <= 8; i++ {
		rtCredit(t, s.Wallet, fmt.Sprintf("c%d", i), "u1", 10, rtT0)
	}
	rows := rtOutbox(t, s.Wallet)
	if len(rows) != 8 {
		t.Fatalf("seeded %d outbox rows, want 8", len(rows))
	}
	key := persistence.AccountKey{AppCode: rtWalletApp, UserID: "u1", AssetType: rtAsset}
	r := persistence.PurgeRequest{Table: persistence.PurgeWalletOutbox, CutoffMs: rtT0 - 72*rtHour, Limit: 2}

	// No notice cursor: no consumer has passed anything.
	r.Consumer = consumer(t, s.Notice, persistence.SourceWalletOutbox)
	if r.Consumer.Found {
		t.Fatalf("fresh notice store has a wallet cursor")
	}
	if n := purgeAll(t, p, r); n != 0 {
		t.Fatalf("without a cursor: deleted %d wallet_outbox rows", n)
	}
	// The cursor has passed row 4: rows 1..4 may go, 5..6 wait for it.
	setCursor(t, s.Notice, persistence.SourceWalletOutbox, persistence.NoticeCursor{Num: rows[3].ID})
	r.Consumer = consumer(t, s.Notice, persistence.SourceWalletOutbox)
	if !r.Consumer.Found || r.Consumer.Num != rows[3].ID {
		t.Fatalf("ConsumerPosition = %+v, want num %d", r.Consumer, rows[3].ID)
	}
	if n := countPurgeable(t, p, r); n != 4 {
		t.Fatalf("dry run counts %d, want 4", n)
	}
	if n := purgeAll(t, p, r); n != 4 {
		t.Fatalf("deleted %d, want 4", n)
	}
	left := rtOutbox(t, s.Wallet)
	if len(left) != 4 || left[0].ID != rows[4].ID {
		t.Fatalf("left %d rows starting at id %d, want 4 from %d", len(left), left[0].ID, rows[4].ID)
	}
	// The cursor passes everything: the old rows go, the new ones (inside
	// the window) stay, and the newest row would stay in any case.
	setCursor(t, s.Notice, persistence.SourceWalletOutbox, persistence.NoticeCursor{Num: rows[7].ID})
	r.Consumer = consumer(t, s.Notice, persistence.SourceWalletOutbox)
	if n := purgeAll(t, p, r); n != 2 {
		t.Fatalf("deleted %d, want the 2 old rows", n)
	}
	r.CutoffMs = rtT0 + rtHour // everything is old now
	if n := purgeAll(t, p, r); n != 1 {
		t.Fatalf("deleted %d, want 1 (the newest row is kept)", n)
	}
	left = rtOutbox(t, s.Wallet)
	if len(left) != 1 || left[0].ID != rows[7].ID {
		t.Fatalf("left %v, want only the newest row", left)
	}
	// A new row gets a new id, after the cursor: the notice worker sees it.
	rtCredit(t, s.Wallet, "c9", "u1", 10, rtT0+1)
	left = rtOutbox(t, s.Wallet)
	if last := left[len(left)-1]; last.ID <= rows[7].ID {
		t.Fatalf("new row took id %d, not after %d", last.ID, rows[7].ID)
	}
	// The ledger and the balance are untouched.
	ledger, err := s.Wallet.Ledger(t.Context(), key)
	mustNoErr(t, "Ledger", err)
	if len(ledger) != 9 {
		t.Fatalf("ledger has %d entries, want 9", len(ledger))
	}
	accs, err := s.Wallet.Accounts(t.Context(), rtWalletApp, "u1")
	mustNoErr(t, "Accounts", err)
	if len(accs) != 1 || accs[0].Available != 90 || accs[0].BalanceVersion != 9 {
		t.Fatalf("account after purges: %+v", accs)
	}
}

func testPurgeNotices(t *testing.T, s RetentionStores) {
	p := purger(t, s.Notice)
	ctx := t.Context()
	old := rtT0 - 200*rtHour
	src := persistence.SourceWalletOutbox
	var rows []persistence.NoticeDelivery
	for i := range 6 {
		rows = append(rows, ntRow(src, fmt.Sprintf("n%d", i), old+int64(i)))
	}
	rows = append(rows, ntRow(persistence.SourceRoomOutbox, "k0", old))
	ntIngest(t, s.Notice, old, rows...)
	// n0, n1, k0 delivered long ago; n2 delivered recently; n3 failed long
	// ago (a dead letter: never purged); n4 retryable; n5 never tried.
	claimed := ntClaim(t, s.Notice, src, "w", old+4, 60_000, 5)
	if len(claimed) != 5 {
		t.Fatalf("claimed %d", len(claimed))
	}
	mustNoErr(t, "MarkDelivered", s.Notice.MarkDelivered(ctx, []persistence.NoticeKey{rows[0].NoticeKey, rows[1].NoticeKey}, old+1))
	mustNoErr(t, "MarkDelivered", s.Notice.MarkDelivered(ctx, []persistence.NoticeKey{rows[2].NoticeKey}, rtT0-rtHour))
	mustNoErr(t, "MarkFailed", s.Notice.MarkFailed(ctx, rows[3].NoticeKey, "w", 9, "gone", old+2))
	mustNoErr(t, "MarkRetryable", s.Notice.MarkRetryable(ctx, rows[4].NoticeKey, "w", 1, "later", old+3, old+3))
	ntClaim(t, s.Notice, persistence.SourceRoomOutbox, "w", old, 60_000, 5)
	mustNoErr(t, "MarkDelivered", s.Notice.MarkDelivered(ctx, []persistence.NoticeKey{rows[6].NoticeKey}, old+4))

	r := persistence.PurgeRequest{Table: persistence.PurgeNoticeDelivery, CutoffMs: rtT0 - 7*24*rtHour, Limit: 2}
	if n := countPurgeable(t, p, r); n != 3 {
		t.Fatalf("dry run counts %d, want 3", n)
	}
	if n := purgeAll(t, p, r); n != 3 {
		t.Fatalf("deleted %d, want 3", n)
	}
	for i, want := range []bool{false, false, true, true, true, true, false} {
		_, err := s.Notice.Get(ctx, rows[i].NoticeKey)
		if got := err == nil; got != want {
			t.Fatalf("notice %s exists=%v (err %v), want %v", rows[i].SourceEventID, got, err, want)
		}
	}
	if d := ntGet(t, s.Notice, rows[3].NoticeKey); d.Status != persistence.NoticeFailed {
		t.Fatalf("dead letter is %s", d.Status)
	}
}

func testPurgeBadRequests(t *testing.T, s RetentionStores) {
	p := purger(t, s.Room)
	key := persistence.RoomKey{AppCode: "lalu", RoomID: "r-bad"}
	ids := appendEvents(t, s.Room, key, []string{"RoomUserJoined"}, []int64{rtT0 - 100*rtHour})
	mustNoErr(t, "mark", s.Room.MarkOutboxPublished(t.Context(), ids[0], rtT0-99*rtHour))
	for _, r := range []persistence.PurgeRequest{
		{Table: persistence.PurgeRoomOutbox, CutoffMs: rtT0, Limit: 0},
		{Table: persistence.PurgeRoomOutbox, CutoffMs: rtT0, Limit: persistence.MaxPurgeBatch + 1},
		{Table: persistence.PurgeRoomOutbox, CutoffMs: 0, Limit: 10},
		{Table: "wallet_ledger", CutoffMs: rtT0, Limit: 10},
		{Table: persistence.PurgeWalletOutbox, CutoffMs: rtT0, Limit: 10}, // not this store's table
	} {
		if _, err := p.Purge(t.Context(), r); err == nil {
			t.Fatalf("Purge(%+v) accepted", r)
		}
	}
	if !outboxExists(t, s.Room, ids[0]) {
		t.Fatalf("a refused purge deleted a row")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.Purge(ctx, persistence.PurgeRequest{Table: persistence.PurgeRoomOutbox, CutoffMs: rtT0, Limit: 10}); err == nil {
		t.Fatalf("Purge with a cancelled context succeeded")
	}
	if !outboxExists(t, s.Room, ids[0]) {
		t.Fatalf("a cancelled purge deleted a row")
	}
}

func testPurgeLease(t *testing.T, s RetentionStores) {
	for _, st := range []any{s.Room, s.Wallet, s.Notice} {
		p := purger(t, st)
		table := p.PurgeTables()[0]
		a, held, err := p.AcquirePurgeLease(t.Context(), table, "node-a", rtT0, 60_000)
		mustNoErr(t, "AcquirePurgeLease a", err)
		if !held {
			t.Fatalf("%s: first lease not held", table)
		}
		_, held, err = p.AcquirePurgeLease(t.Context(), table, "node-b", rtT0+1, 60_000)
		mustNoErr(t, "AcquirePurgeLease b", err)
		if held {
			t.Fatalf("%s: two owners hold the purge lease", table)
		}
		// Another table's lease is independent.
		if tables := p.PurgeTables(); len(tables) > 1 {
			o, held, err := p.AcquirePurgeLease(t.Context(), tables[1], "node-b", rtT0+1, 60_000)
			mustNoErr(t, "AcquirePurgeLease other table", err)
			if !held {
				t.Fatalf("%s: lease of %s blocked by %s", tables[1], tables[1], table)
			}
			o.Release()
		}
		a.Release()
		b, held, err := p.AcquirePurgeLease(t.Context(), table, "node-b", rtT0+2, 60_000)
		mustNoErr(t, "AcquirePurgeLease after release", err)
		if !held {
			t.Fatalf("%s: lease not free after release", table)
		}
		b.Release()
	}
}
