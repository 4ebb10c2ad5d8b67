package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// A bulk requeue whose limit cuts a command takes the command's first
// events (by their index, not their ids' text): its later events stay
// parked behind them, so none reaches IM before an earlier one.
func testOutboxBulkCutsCommandsInOrder(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	big := bigCommand(t, s, roomA, 1, 25, 100)
	for _, id := range big {
		mustNoErr(t, "park", s.ParkOutbox(ctx, id, "im: 503", 1000))
	}
	n, err := s.BulkRequeueOutbox(ctx, persistence.OutboxSelector{Limit: 12}, 2000)
	mustNoErr(t, "BulkRequeueOutbox", err)
	if n != 12 {
		t.Fatalf("requeued %d rows, want 12", n)
	}
	for i, id := range big {
		want := persistence.OutboxParked
		if i < 12 {
			want = persistence.OutboxPending
		}
		if g := getOutbox(t, s, id); g.Status != want {
			t.Fatalf("event %d (%s) is %s after a requeue of 12, want %s", i, id, g.Status, want)
		}
	}
	n, err = s.BulkSkipOutbox(ctx, persistence.OutboxSelector{Status: persistence.OutboxParked, Limit: 3}, "ops", "test", 3000)
	mustNoErr(t, "BulkSkipOutbox", err)
	for i, id := range big[12:] {
		want := persistence.OutboxParked
		if i < 3 {
			want = persistence.OutboxSkipped
		}
		if g := getOutbox(t, s, id); n != 3 || g.Status != want {
			t.Fatalf("skip of 3 (changed %d): event %d is %s, want %s", n, 12+i, g.Status, want)
		}
	}
}

// testOutboxBulk: a bulk requeue or skip changes exactly the rows its
// filters (status, app, room, time range, error text) admit, oldest first
// within its limit; the count (dry run) changes nothing and agrees with
// the change that follows; a repeat finds nothing; published rows and
// rows already due are never touched.
func testOutboxBulk(t *testing.T, s persistence.Store) {
	ctx := t.Context()
	roomB := persistence.RoomKey{AppCode: roomA.AppCode, RoomID: "room-b"}
	otherApp := persistence.RoomKey{AppCode: "app2", RoomID: "room-c"}
	a := seedOutbox(t, s, roomA, 100, 200, 300, 400, 500)
	b := seedOutbox(t, s, roomB, 100, 200)
	o := seedOutbox(t, s, otherApp, 150)
	mustNoErr(t, "park a0", s.ParkOutbox(ctx, a[0], "im: request timeout", 1000))
	mustNoErr(t, "park a1", s.ParkOutbox(ctx, a[1], "im: ErrorCode 70398", 1000))
	mustNoErr(t, "fail a2", s.MarkOutboxFailed(ctx, a[2], "IM: Request TIMEOUT", 1000, 5000))
	mustNoErr(t, "park b0", s.ParkOutbox(ctx, b[0], "timeout", 1000))
	mustNoErr(t, "park o0", s.ParkOutbox(ctx, o[0], "timeout", 1000))
	// a3, a4 and b1 are pending and due since their creation.
	mustNoErr(t, "publish a4", s.MarkOutboxPublished(ctx, a[4], 1000))

	const now = 2000
	count := func(sel persistence.OutboxSelector) int {
		t.Helper()
		n, err := s.CountRequeueOutbox(ctx, sel, now)
		mustNoErr(t, "CountRequeueOutbox", err)
		return n
	}
	for _, c := range []struct {
		what string
		sel  persistence.OutboxSelector
		want int
	}{
		{"everything requeueable (parked, or pending not yet due)", persistence.OutboxSelector{}, 5},
		{"error text, case ignored", persistence.OutboxSelector{ErrorContains: "TimeOut"}, 4},
		{"app", persistence.OutboxSelector{AppCode: "app2"}, 1},
		{"room", persistence.OutboxSelector{AppCode: roomA.AppCode, RoomID: roomA.RoomID}, 3},
		{"status parked", persistence.OutboxSelector{Status: persistence.OutboxParked}, 4},
		{"status pending (not yet due)", persistence.OutboxSelector{Status: persistence.OutboxPending}, 1},
		{"created in [150, 350)", persistence.OutboxSelector{CreatedFromMs: 150, CreatedToMs: 350}, 3},
		{"limit", persistence.OutboxSelector{Limit: 2}, 2},
		{"error code", persistence.OutboxSelector{ErrorContains: "70398"}, 1},
		{"nothing", persistence.OutboxSelector{ErrorContains: "no such error"}, 0},
	} {
		if got := count(c.sel); got != c.want {
			t.Errorf("count %s: %d, want %d", c.what, got, c.want)
		}
	}
	if g := getOutbox(t, s, a[0]); g.Status != persistence.OutboxParked {
		t.Fatalf("a count changed a row: %+v", g)
	}

	sel := persistence.OutboxSelector{ErrorContains: "timeout", Limit: 2}
	n, err := s.BulkRequeueOutbox(ctx, sel, now)
	mustNoErr(t, "BulkRequeueOutbox", err)
	if n != 2 {
		t.Fatalf("bulk requeue with limit 2 changed %d rows", n)
	}
	// Oldest first: the two rows created at 100 (a0, b0), not o0 (150)
	// or a2 (300).
	for _, id := range []string{a[0], b[0]} {
		if g := getOutbox(t, s, id); g.Status != persistence.OutboxPending || g.NextRetryAtMs != now || g.UpdatedAtMs != now {
			t.Fatalf("requeued %s: %+v", id, g)
		}
	}
	if g := getOutbox(t, s, o[0]); g.Status != persistence.OutboxParked {
		t.Fatalf("a row past the limit was requeued: %+v", g)
	}
	sel.Limit = 0
	if n, err = s.BulkRequeueOutbox(ctx, sel, now); err != nil || n != 2 {
		t.Fatalf("second bulk requeue: %d rows, %v; want 2 (o0, a2)", n, err)
	}
	if g := getOutbox(t, s, a[2]); g.Status != persistence.OutboxPending || g.NextRetryAtMs != now || g.RetryCount != 1 || g.LastError != "IM: Request TIMEOUT" {
		t.Fatalf("requeued pending a2: %+v", g)
	}
	if n, err = s.BulkRequeueOutbox(ctx, sel, now); err != nil || n != 0 {
		t.Fatalf("repeated bulk requeue: %d rows, %v; want 0", n, err)
	}

	skip := persistence.OutboxSelector{AppCode: roomA.AppCode, RoomID: roomA.RoomID}
	if n, err := s.CountSkipOutbox(ctx, skip); err != nil || n != 4 {
		t.Fatalf("count skip of room-a: %d, %v; want 4 (a0-a3, not published a4)", n, err)
	}
	if n, err := s.BulkSkipOutbox(ctx, persistence.OutboxSelector{Status: persistence.OutboxParked}, "ops:alice", "IM outage, rooms re-synced", 3000); err != nil || n != 1 {
		t.Fatalf("bulk skip of parked rows: %d, %v; want 1 (a1)", n, err)
	}
	if g := getOutbox(t, s, a[1]); g.Status != persistence.OutboxSkipped || g.ResolvedBy != "ops:alice" || g.ResolvedAtMs != 3000 || g.Resolution != "IM outage, rooms re-synced" {
		t.Fatalf("skipped a1: %+v", g)
	}
	if n, err := s.BulkSkipOutbox(ctx, skip, "ops:bob", "room closed", 3100); err != nil || n != 3 {
		t.Fatalf("bulk skip of room-a: %d, %v; want 3 (a0, a2, a3)", n, err)
	}
	if g := getOutbox(t, s, a[4]); g.Status != persistence.OutboxPublished {
		t.Fatalf("a bulk skip touched a published row: %+v", g)
	}
	if g := getOutbox(t, s, a[1]); g.ResolvedBy != "ops:alice" {
		t.Fatalf("a second skip rewrote the record: %+v", g)
	}
	if g := getOutbox(t, s, b[1]); g.Status != persistence.OutboxPending {
		t.Fatalf("a bulk skip of room-a touched room-b: %+v", g)
	}
	if n, err := s.CountSkipOutbox(ctx, skip); err != nil || n != 0 {
		t.Fatalf("count skip after the skip: %d, %v", n, err)
	}
}

// testNoticeBulk: a bulk requeue takes back exactly the dead letters its
// filters admit, each as Requeue would (retryable, due now, retry_count
// 0, requeue_count+1); the count is the dry run; a repeat finds nothing;
// rows that are not failed are never touched.
func testNoticeBulk(t *testing.T, s persistence.NoticeStore) {
	ctx := context.Background()
	const w, r = persistence.SourceWalletOutbox, persistence.SourceRoomOutbox
	dead := func(source, id string, createdMs int64, user, lastError string) persistence.NoticeDelivery {
		d := ntRow(source, id, createdMs)
		d.Status, d.RetryCount, d.LastError, d.NextRetryAtMs = persistence.NoticeFailed, 11, lastError, createdMs+10
		if user != "" {
			d.UserID = user
		}
		return d
	}
	ntIngest(t, s, 1000,
		dead(w, "w1", 100, "u1", "im: timeout"),
		dead(w, "w2", 200, "u1", "im: ErrorCode 20003"),
		dead(w, "w3", 300, "u2", "IM: TIMEOUT"),
		dead(r, "r1", 150, "u1", "im: timeout"),
		ntRow(w, "live", 50), // delivering: never requeued
	)
	count := func(sel persistence.NoticeSelector) int {
		t.Helper()
		n, err := s.CountRequeue(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		what string
		sel  persistence.NoticeSelector
		want int
	}{
		{"every dead letter", persistence.NoticeSelector{}, 4},
		{"source", persistence.NoticeSelector{SourceName: r}, 1},
		{"user", persistence.NoticeSelector{UserID: "u1"}, 3},
		{"error text, case ignored", persistence.NoticeSelector{ErrorContains: "Timeout"}, 3},
		{"created in [150, 300)", persistence.NoticeSelector{CreatedFromMs: 150, CreatedToMs: 300}, 2},
		{"app", persistence.NoticeSelector{AppCode: "other"}, 0},
		{"event type", persistence.NoticeSelector{EventType: "WalletBalanceChanged"}, 4},
		{"limit", persistence.NoticeSelector{Limit: 3}, 3},
	} {
		if got := count(c.sel); got != c.want {
			t.Errorf("count %s: %d, want %d", c.what, got, c.want)
		}
	}
	if got := ntGet(t, s, dead(w, "w1", 100, "", "").NoticeKey); got.Status != persistence.NoticeFailed {
		t.Fatalf("a count changed a row: %+v", got)
	}
	n, err := s.BulkRequeue(ctx, persistence.NoticeSelector{ErrorContains: "timeout", Limit: 2}, 5000)
	if err != nil || n != 2 {
		t.Fatalf("bulk requeue with limit 2: %d, %v", n, err)
	}
	// Oldest source event first: w1 (100) and r1 (150), not w3 (300).
	for _, d := range []persistence.NoticeDelivery{dead(w, "w1", 100, "", ""), dead(r, "r1", 150, "", "")} {
		got := ntGet(t, s, d.NoticeKey)
		ntWant(t, got, persistence.NoticeRetryable, 0, "")
		if got.NextRetryAtMs != 5000 || got.RequeueCount != 1 || got.RequeuedAtMs != 5000 || got.LastError != "im: timeout" {
			t.Fatalf("requeued %s: %+v", d.SourceEventID, got)
		}
	}
	if got := ntGet(t, s, dead(w, "w3", 300, "", "").NoticeKey); got.Status != persistence.NoticeFailed {
		t.Fatalf("a row past the limit was requeued: %+v", got)
	}
	if n, err := s.BulkRequeue(ctx, persistence.NoticeSelector{ErrorContains: "timeout"}, 5000); err != nil || n != 1 {
		t.Fatalf("second bulk requeue: %d, %v; want 1 (w3)", n, err)
	}
	if n, err := s.BulkRequeue(ctx, persistence.NoticeSelector{ErrorContains: "timeout"}, 5000); err != nil || n != 0 {
		t.Fatalf("repeated bulk requeue: %d, %v; want 0", n, err)
	}
	if got := ntGet(t, s, ntRow(w, "live", 50).NoticeKey); got.Status != persistence.NoticeDelivering || got.RequeueCount != 0 {
		t.Fatalf("a bulk requeue touched a live row: %+v", got)
	}
	// The requeued rows are claimable at once.
	ids := ntIDs(ntClaim(t, s, w, ntOwnerA, 5000, 100, 10))
	slices.Sort(ids)
	if got := fmt.Sprint(ids); got != "[live w1 w3]" {
		t.Fatalf("claim after the bulk requeue: %s", got)
	}
}

// testNoticeBulkMany: a bulk requeue larger than one backend statement
// takes every row once.
func testNoticeBulkMany(t *testing.T, s persistence.NoticeStore) {
	ctx := context.Background()
	const total = 2500
	rows := make([]persistence.NoticeDelivery, total)
	for i := range rows {
		d := ntRow(persistence.SourceWalletOutbox, fmt.Sprintf("e%05d", i), int64(100+i))
		d.Status, d.RetryCount, d.LastError = persistence.NoticeFailed, 11, "im: timeout"
		rows[i] = d
	}
	ntIngest(t, s, 1000, rows...)
	if n, err := s.CountRequeue(ctx, persistence.NoticeSelector{}); err != nil || n != total {
		t.Fatalf("count: %d, %v", n, err)
	}
	if n, err := s.BulkRequeue(ctx, persistence.NoticeSelector{Limit: total - 1}, 5000); err != nil || n != total-1 {
		t.Fatalf("bulk requeue with limit %d: %d, %v", total-1, n, err)
	}
	if n, err := s.BulkRequeue(ctx, persistence.NoticeSelector{}, 5000); err != nil || n != 1 {
		t.Fatalf("the rest: %d, %v", n, err)
	}
	st, err := s.Stats(ctx, persistence.SourceWalletOutbox, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if st.Failed != 0 || st.Retryable != total {
		t.Fatalf("stats after the bulk requeue: %+v", st)
	}
	for _, d := range rows[:3] {
		if got := ntGet(t, s, d.NoticeKey); got.RequeueCount != 1 {
			t.Fatalf("%s requeued %d times", d.SourceEventID, got.RequeueCount)
		}
	}
}

// testNoticeBulkSkip: a bulk skip gives up exactly the dead letters its
// filters admit: skipped, never claimed or requeued again, no longer
// counted as dead letters, listed under skipped, last_error saying who,
// why and what the row died of; a repeat finds nothing.
func testNoticeBulkSkip(t *testing.T, s persistence.NoticeStore) {
	ctx := context.Background()
	const w = persistence.SourceWalletOutbox
	dead := func(id string, createdMs int64, lastError string) persistence.NoticeDelivery {
		d := ntRow(w, id, createdMs)
		d.Status, d.RetryCount, d.LastError = persistence.NoticeFailed, 11, lastError
		return d
	}
	ntIngest(t, s, 1000, dead("e1", 100, "im: 90011 account gone"), dead("e2", 200, "im: timeout"), dead("e3", 300, "im: 90011 account gone"))
	n, err := s.BulkSkip(ctx, persistence.NoticeSelector{ErrorContains: "90011"}, "ops:alice", "accounts deleted", 5000)
	if err != nil || n != 2 {
		t.Fatalf("bulk skip: %d, %v; want 2", n, err)
	}
	got := ntGet(t, s, dead("e1", 100, "").NoticeKey)
	if got.Status != persistence.NoticeSkipped || got.LastError != "skipped by ops:alice: accounts deleted (was: im: 90011 account gone)" ||
		got.NextRetryAtMs != 5000 || got.UpdatedAtMs != 5000 || got.RequeueCount != 0 {
		t.Fatalf("skipped row: %+v", got)
	}
	if n, err := s.BulkSkip(ctx, persistence.NoticeSelector{ErrorContains: "90011"}, "ops:bob", "again", 6000); err != nil || n != 0 {
		t.Fatalf("repeated bulk skip: %d, %v", n, err)
	}
	st, err := s.Stats(ctx, w, 7000)
	if err != nil || st.Failed != 1 {
		t.Fatalf("stats after the skip: %+v %v; want 1 dead letter (e2)", st, err)
	}
	if n, err := s.CountRequeue(ctx, persistence.NoticeSelector{}); err != nil || n != 1 {
		t.Fatalf("requeueable after the skip: %d, %v; want 1", n, err)
	}
	if _, err := s.Requeue(ctx, got.NoticeKey, 7000); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("requeue of a skipped row: %v", err)
	}
	if rows := ntClaim(t, s, w, ntOwnerA, 1<<50, 100, 10); len(rows) != 0 {
		t.Fatalf("claim took skipped or failed rows: %v", ntIDs(rows))
	}
	listed, err := s.List(ctx, persistence.NoticeFilter{Status: persistence.NoticeSkipped, Limit: 10})
	if err != nil || len(listed) != 2 {
		t.Fatalf("list skipped: %v %v", ntIDs(listed), err)
	}
}
