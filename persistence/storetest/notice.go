package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// RunNoticeStore runs the persistence.NoticeStore contract (seed 003's delivery table
// and scan cursors): every state transition (delivering → delivered,
// retryable, failed; lease expiry reclaim; release; requeue), the
// idempotency of ingest, that two owners never hold one row, and the
// cursor lease. newStore must return an empty store per call and arrange
// Close and teardown with t.Cleanup.
func RunNoticeStore(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s persistence.NoticeStore)
	}{
		{"IngestIsIdempotent", testNoticeIngest},
		{"IngestCorruptIsDeadLetter", testNoticeIngestCorrupt},
		{"ClaimOldestFirstOnceAndReclaimExpired", testNoticeClaim},
		{"DeliveringToDelivered", testNoticeDelivered},
		{"DeliveringToRetryableThenDue", testNoticeRetryable},
		{"DeliveringToFailedNeverClaimed", testNoticeFailed},
		{"RequeueDeadLetter", testNoticeRequeue},
		{"ReleaseUnattempted", testNoticeRelease},
		{"LateFailureOfLostLeaseRefused", testNoticeLostLease},
		{"ListFindStats", testNoticeListFindStats},
		{"SourcesIsolated", testNoticeSources},
		{"CursorLease", testNoticeCursor},
		{"ConcurrentClaimsNeverOverlap", testNoticeConcurrentClaims},
		{"BulkRequeue", testNoticeBulk},
		{"BulkRequeueMany", testNoticeBulkMany},
		{"BulkSkip", testNoticeBulkSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

const (
	ntApp    = "lalu"
	ntOwnerA = "node-a/1"
	ntOwnerB = "node-b/1"
)

func ntRow(source, id string, createdMs int64) persistence.NoticeDelivery {
	return persistence.NoticeDelivery{
		NoticeKey:         persistence.NoticeKey{SourceName: source, AppCode: ntApp, SourceEventID: id, Channel: persistence.ChannelIMC2C},
		EventType:         "WalletBalanceChanged",
		UserID:            "u-" + id,
		Ext:               "wallet_notice",
		Payload:           json.RawMessage(fmt.Sprintf(`{"event_id":%q,"balance_version":%d}`, id, createdMs)),
		Ingress:           persistence.IngressPoll,
		SourceCreatedAtMs: createdMs,
	}
}

func ntIngest(t *testing.T, s persistence.NoticeStore, nowMs int64, rows ...persistence.NoticeDelivery) int {
	t.Helper()
	n, err := s.Ingest(context.Background(), rows, nowMs)
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return n
}

func ntGet(t *testing.T, s persistence.NoticeStore, k persistence.NoticeKey) persistence.NoticeDelivery {
	t.Helper()
	d, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatalf("get %s: %v", k, err)
	}
	return d
}

func ntClaim(t *testing.T, s persistence.NoticeStore, source, owner string, nowMs, leaseMs int64, limit int) []persistence.NoticeDelivery {
	t.Helper()
	rows, err := s.Claim(context.Background(), source, owner, nowMs, leaseMs, limit)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return rows
}

func ntIDs(rows []persistence.NoticeDelivery) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.SourceEventID
	}
	return out
}

func ntWant(t *testing.T, d persistence.NoticeDelivery, status string, retry int, lockedBy string) {
	t.Helper()
	if d.Status != status || d.RetryCount != retry || d.LockedBy != lockedBy {
		t.Fatalf("%s: status %s retry_count %d locked_by %q; want %s %d %q", d.SourceEventID, d.Status, d.RetryCount, d.LockedBy, status, retry, lockedBy)
	}
}

func testNoticeIngest(t *testing.T, s persistence.NoticeStore) {
	a, b, c := ntRow(persistence.SourceWalletOutbox, "e1", 100), ntRow(persistence.SourceWalletOutbox, "e2", 200), ntRow(persistence.SourceWalletOutbox, "e3", 300)
	if n := ntIngest(t, s, 1000, a, b, c); n != 3 {
		t.Fatalf("first ingest wrote %d rows, want 3", n)
	}
	// The same facts again (a second scan, the MQ consumer) plus one new:
	// only the new one is written, and nothing about the old ones changes.
	again := a
	again.Payload = json.RawMessage(`{"changed":true}`)
	again.Ingress = persistence.IngressMQ
	d := ntRow(persistence.SourceWalletOutbox, "e4", 400)
	d.Ingress = persistence.IngressMQ
	if n := ntIngest(t, s, 2000, again, b, c, d); n != 1 {
		t.Fatalf("second ingest wrote %d rows, want 1", n)
	}
	got := ntGet(t, s, a.NoticeKey)
	ntWant(t, got, persistence.NoticeDelivering, 0, "")
	if string(got.Payload) != string(a.Payload) || got.Ingress != persistence.IngressPoll || got.CreatedAtMs != 1000 ||
		got.NextRetryAtMs != 100 || got.LockUntilMs != 0 || got.UserID != a.UserID || got.Ext != a.Ext || got.EventType != a.EventType {
		t.Fatalf("ingested row %+v", got)
	}
	if got := ntGet(t, s, d.NoticeKey); got.Ingress != persistence.IngressMQ || got.SourceCreatedAtMs != 400 {
		t.Fatalf("mq row %+v", got)
	}
	if _, err := s.Get(context.Background(), ntRow(persistence.SourceWalletOutbox, "nope", 1).NoticeKey); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
}

func testNoticeIngestCorrupt(t *testing.T, s persistence.NoticeStore) {
	bad := ntRow(persistence.SourceWalletOutbox, "bad", 100)
	bad.Status, bad.LastError, bad.RetryCount = persistence.NoticeFailed, "corrupt source event: payload", 0
	if n := ntIngest(t, s, 1000, bad); n != 1 {
		t.Fatalf("ingest wrote %d", n)
	}
	got := ntGet(t, s, bad.NoticeKey)
	ntWant(t, got, persistence.NoticeFailed, 0, "")
	if got.LastError != bad.LastError {
		t.Fatalf("last_error %q", got.LastError)
	}
	if rows := ntClaim(t, s, persistence.SourceWalletOutbox, ntOwnerA, 1<<50, 1000, 10); len(rows) != 0 {
		t.Fatalf("a dead letter was claimed: %v", ntIDs(rows))
	}
}

func testNoticeClaim(t *testing.T, s persistence.NoticeStore) {
	const src = persistence.SourceWalletOutbox
	// Ingested out of order: claims still go oldest first.
	ntIngest(t, s, 1000, ntRow(src, "e5", 500), ntRow(src, "e1", 100), ntRow(src, "e3", 300), ntRow(src, "e2", 200), ntRow(src, "e4", 400))
	a := ntClaim(t, s, src, ntOwnerA, 1000, 100, 3)
	if !slices.Equal(ntIDs(a), []string{"e1", "e2", "e3"}) {
		t.Fatalf("A claimed %v, want e1 e2 e3", ntIDs(a))
	}
	for _, d := range a {
		if d.Status != persistence.NoticeDelivering || d.LockedBy != ntOwnerA || d.LockUntilMs != 1100 || d.NextRetryAtMs != 1100 {
			t.Fatalf("claimed row %+v", d)
		}
		if stored := ntGet(t, s, d.NoticeKey); stored.LockedBy != ntOwnerA || stored.LockUntilMs != 1100 {
			t.Fatalf("stored claim %+v", stored)
		}
	}
	b := ntClaim(t, s, src, ntOwnerB, 1050, 100, 10)
	if !slices.Equal(ntIDs(b), []string{"e4", "e5"}) {
		t.Fatalf("B claimed %v while A's leases run, want e4 e5", ntIDs(b))
	}
	if rows := ntClaim(t, s, src, ntOwnerB, 1099, 100, 10); len(rows) != 0 {
		t.Fatalf("claimed %v under live leases", ntIDs(rows))
	}
	// A's lease expires (A crashed): B takes its rows over.
	re := ntClaim(t, s, src, ntOwnerB, 1100, 100, 10)
	if !slices.Equal(ntIDs(re), []string{"e1", "e2", "e3"}) {
		t.Fatalf("reclaim after expiry got %v", ntIDs(re))
	}
	for _, d := range re {
		if d.LockedBy != ntOwnerB || d.LockUntilMs != 1200 {
			t.Fatalf("reclaimed row %+v", d)
		}
	}
	if rows := ntClaim(t, s, src, ntOwnerA, 1000, 100, 0); len(rows) != 0 {
		t.Fatal("limit 0 claimed rows")
	}
}

func testNoticeDelivered(t *testing.T, s persistence.NoticeStore) {
	const src = persistence.SourceWalletOutbox
	ntIngest(t, s, 1000, ntRow(src, "e1", 100), ntRow(src, "e2", 200))
	rows := ntClaim(t, s, src, ntOwnerA, 1000, 100, 10)
	unknown := ntRow(src, "nope", 1).NoticeKey
	if err := s.MarkDelivered(context.Background(), []persistence.NoticeKey{rows[0].NoticeKey, rows[1].NoticeKey, unknown}, 1010); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		got := ntGet(t, s, r.NoticeKey)
		ntWant(t, got, persistence.NoticeDelivered, 0, "")
		if got.DeliveredAtMs != 1010 || got.LockUntilMs != 0 || string(got.Payload) != string(r.Payload) {
			t.Fatalf("delivered row %+v", got)
		}
	}
	if again := ntClaim(t, s, src, ntOwnerB, 1<<50, 100, 10); len(again) != 0 {
		t.Fatalf("delivered rows claimed again: %v", ntIDs(again))
	}
	if err := s.MarkDelivered(context.Background(), []persistence.NoticeKey{rows[0].NoticeKey}, 2000); err != nil {
		t.Fatal(err)
	}
	if got := ntGet(t, s, rows[0].NoticeKey); got.DeliveredAtMs != 1010 {
		t.Fatalf("second delivered mark changed the row: %+v", got)
	}
}

func testNoticeRetryable(t *testing.T, s persistence.NoticeStore) {
	const src = persistence.SourceWalletOutbox
	ntIngest(t, s, 1000, ntRow(src, "e1", 100))
	r := ntClaim(t, s, src, ntOwnerA, 1000, 100, 10)[0]
	ctx := context.Background()
	if err := s.MarkRetryable(ctx, r.NoticeKey, ntOwnerB, 1, "x", 2000, 1010); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("retryable mark by a non-holder: %v", err)
	}
	if err := s.MarkRetryable(ctx, r.NoticeKey, ntOwnerA, 1, "im: timeout", 2000, 1010); err != nil {
		t.Fatal(err)
	}
	got := ntGet(t, s, r.NoticeKey)
	ntWant(t, got, persistence.NoticeRetryable, 1, "")
	if got.LastError != "im: timeout" || got.NextRetryAtMs != 2000 || got.LockUntilMs != 0 || got.UpdatedAtMs != 1010 {
		t.Fatalf("retryable row %+v", got)
	}
	if rows := ntClaim(t, s, src, ntOwnerB, 1999, 100, 10); len(rows) != 0 {
		t.Fatalf("claimed before next_retry_at_ms: %v", ntIDs(rows))
	}
	rows := ntClaim(t, s, src, ntOwnerB, 2000, 100, 10)
	if len(rows) != 1 || rows[0].RetryCount != 1 || rows[0].LockedBy != ntOwnerB || rows[0].Status != persistence.NoticeDelivering {
		t.Fatalf("due retry claim %+v", rows)
	}
	if err := s.MarkRetryable(ctx, r.NoticeKey, ntOwnerB, 2, "im: 503", 5000, 2010); err != nil {
		t.Fatal(err)
	}
	if got := ntGet(t, s, r.NoticeKey); got.RetryCount != 2 || got.LastError != "im: 503" {
		t.Fatalf("second failure %+v", got)
	}
	// A success after failures keeps the history.
	rows = ntClaim(t, s, src, ntOwnerA, 5000, 100, 10)
	if err := s.MarkDelivered(ctx, []persistence.NoticeKey{rows[0].NoticeKey}, 5010); err != nil {
		t.Fatal(err)
	}
	if got := ntGet(t, s, r.NoticeKey); got.Status != persistence.NoticeDelivered || got.RetryCount != 2 || got.LastError != "im: 503" {
		t.Fatalf("delivered after retries %+v", got)
	}
}

func testNoticeFailed(t *testing.T, s persistence.NoticeStore) {
	const src = persistence.SourceWalletOutbox
	ntIngest(t, s, 1000, ntRow(src, "e1", 100), ntRow(src, "e2", 200))
	rows := ntClaim(t, s, src, ntOwnerA, 1000, 100, 10)
	ctx := context.Background()
	if err := s.MarkFailed(ctx, rows[0].NoticeKey, ntOwnerB, 11, "x", 1010); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("failed mark by a non-holder: %v", err)
	}
	if err := s.MarkFailed(ctx, rows[0].NoticeKey, ntOwnerA, 11, "im: 80001 content", 1010); err != nil {
		t.Fatal(err)
	}
	got := ntGet(t, s, rows[0].NoticeKey)
	ntWant(t, got, persistence.NoticeFailed, 11, "")
	if got.LastError != "im: 80001 content" || got.NextRetryAtMs != 1010 {
		t.Fatalf("failed row %+v", got)
	}
	if again := ntClaim(t, s, src, ntOwnerB, 1<<50, 100, 10); !slices.Equal(ntIDs(again), []string{"e2"}) {
		t.Fatalf("claim after a dead letter got %v, want only e2 (its lease expired)", ntIDs(again))
	}
	if err := s.MarkDelivered(ctx, []persistence.NoticeKey{rows[0].NoticeKey}, 2000); err != nil {
		t.Fatal(err)
	}
	if got := ntGet(t, s, rows[0].NoticeKey); got.Status != persistence.NoticeFailed {
		t.Fatalf("a delivered mark revived a dead letter: %s", got.Status)
	}
	st, err := s.Stats(ctx, src, 1<<50)
	if err != nil {
		t.Fatal(err)
	}
	if st.Failed != 1 {
		t.Fatalf("stats %+v, want 1 failed", st)
	}
}

func testNoticeRequeue(t *testing.T, s persistence.NoticeStore) {
	const src = persistence.SourceWalletOutbox
	ntIngest(t, s, 1000, ntRow(src, "e1", 100), ntRow(src, "e2", 200))
	rows := ntClaim(t, s, src, ntOwnerA, 1000, 100, 10)
	ctx := context.Background()
	if err := s.MarkFailed(ctx, rows[0].NoticeKey, ntOwnerA, 11, "im: down", 1010); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Requeue(ctx, rows[1].NoticeKey, 1020); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("requeue of a delivering row: %v", err)
	}
	if _, err := s.Requeue(ctx, ntRow(src, "nope", 1).NoticeKey, 1020); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("requeue of an unknown row: %v", err)
	}
	got, err := s.Requeue(ctx, rows[0].NoticeKey, 3000)
	if err != nil {
		t.Fatal(err)
	}
	ntWant(t, got, persistence.NoticeRetryable, 0, "")
	if got.RequeueCount != 1 || got.RequeuedAtMs != 3000 || got.NextRetryAtMs != 3000 || got.LastError != "im: down" {
		t.Fatalf("requeued row %+v", got)
	}
	if stored := ntGet(t, s, rows[0].NoticeKey); stored.RequeueCount != 1 || stored.Status != persistence.NoticeRetryable {
		t.Fatalf("stored requeued row %+v", stored)
	}
	again := ntClaim(t, s, src, ntOwnerB, 3000, 100, 1)
	if len(again) != 1 || again[0].SourceEventID != "e1" {
		t.Fatalf("requeued row not claimable: %v", ntIDs(again))
	}
	if err := s.MarkFailed(ctx, again[0].NoticeKey, ntOwnerB, 11, "im: down again", 3010); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Requeue(ctx, again[0].NoticeKey, 4000); err != nil || got.RequeueCount != 2 {
		t.Fatalf("second requeue %+v %v", got, err)
	}
}

func testNoticeRelease(t *testing.T, s persistence.NoticeStore) {
	const src = persistence.SourceWalletOutbox
	ntIngest(t, s, 1000, ntRow(src, "e1", 100), ntRow(src, "e2", 200))
	rows := ntClaim(t, s, src, ntOwnerA, 1000, 10_000, 10)
	ctx := context.Background()
	if err := s.Release(ctx, []persistence.NoticeKey{rows[0].NoticeKey}, ntOwnerB, 1010); err != nil {
		t.Fatal(err)
	}
	if got := ntGet(t, s, rows[0].NoticeKey); got.LockedBy != ntOwnerA {
		t.Fatalf("a non-holder released the row: %+v", got)
	}
	if err := s.Release(ctx, []persistence.NoticeKey{rows[0].NoticeKey}, ntOwnerA, 1010); err != nil {
		t.Fatal(err)
	}
	got := ntGet(t, s, rows[0].NoticeKey)
	ntWant(t, got, persistence.NoticeDelivering, 0, "")
	if got.LockUntilMs != 0 || got.NextRetryAtMs != 1010 {
		t.Fatalf("released row %+v", got)
	}
	if again := ntClaim(t, s, src, ntOwnerB, 1010, 100, 10); !slices.Equal(ntIDs(again), []string{"e1"}) {
		t.Fatalf("after release B claimed %v, want e1 only", ntIDs(again))
	}
}

func testNoticeLostLease(t *testing.T, s persistence.NoticeStore) {
	const src = persistence.SourceWalletOutbox
	ntIngest(t, s, 1000, ntRow(src, "e1", 100))
	a := ntClaim(t, s, src, ntOwnerA, 1000, 100, 10)[0]
	b := ntClaim(t, s, src, ntOwnerB, 1200, 100, 10)
	if len(b) != 1 {
		t.Fatal("expired lease not reclaimed")
	}
	ctx := context.Background()
	if err := s.MarkDelivered(ctx, []persistence.NoticeKey{b[0].NoticeKey}, 1210); err != nil {
		t.Fatal(err)
	}
	// A wakes up late with a failure: it must not reopen the delivered row.
	if err := s.MarkRetryable(ctx, a.NoticeKey, ntOwnerA, 1, "late", 3000, 1300); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("late failure of a lost lease: %v", err)
	}
	if err := s.MarkFailed(ctx, a.NoticeKey, ntOwnerA, 11, "late", 1300); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("late dead letter of a lost lease: %v", err)
	}
	if got := ntGet(t, s, a.NoticeKey); got.Status != persistence.NoticeDelivered {
		t.Fatalf("row is %s", got.Status)
	}
}

func testNoticeListFindStats(t *testing.T, s persistence.NoticeStore) {
	ctx := context.Background()
	ntIngest(t, s, 1000,
		ntRow(persistence.SourceWalletOutbox, "w1", 100), ntRow(persistence.SourceWalletOutbox, "w2", 200),
		ntRow(persistence.SourceWalletOutbox, "w3", 300), ntRow(persistence.SourceRoomOutbox, "r1", 150),
		ntRow(persistence.SourceRoomOutbox, "shared", 160))
	// Another app's fact with the same event id.
	other := ntRow(persistence.SourceRoomOutbox, "shared", 170)
	other.AppCode = "other"
	ntIngest(t, s, 1000, other)
	rows := ntClaim(t, s, persistence.SourceWalletOutbox, ntOwnerA, 1000, 100, 2) // w1, w2
	if err := s.MarkFailed(ctx, rows[0].NoticeKey, ntOwnerA, 11, "dead", 1005); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkRetryable(ctx, rows[1].NoticeKey, ntOwnerA, 1, "again", 5000, 1005); err != nil {
		t.Fatal(err)
	}
	failed, err := s.List(ctx, persistence.NoticeFilter{Status: persistence.NoticeFailed, Limit: 10})
	if err != nil || !slices.Equal(ntIDs(failed), []string{"w1"}) {
		t.Fatalf("list failed: %v %v", ntIDs(failed), err)
	}
	room, err := s.List(ctx, persistence.NoticeFilter{Status: persistence.NoticeDelivering, SourceName: persistence.SourceRoomOutbox, Limit: 10})
	if err != nil || !slices.Equal(ntIDs(room), []string{"r1", "shared", "shared"}) {
		t.Fatalf("list delivering room rows: %v %v", ntIDs(room), err)
	}
	all, err := s.List(ctx, persistence.NoticeFilter{Limit: 100})
	if err != nil || len(all) != 6 {
		t.Fatalf("list all: %d rows, %v", len(all), err)
	}
	if two, _ := s.List(ctx, persistence.NoticeFilter{Limit: 2}); len(two) != 2 {
		t.Fatalf("limit 2 gave %d", len(two))
	}
	found, err := s.FindBySourceEvent(ctx, "shared")
	if err != nil || len(found) != 2 {
		t.Fatalf("find shared: %d rows, %v", len(found), err)
	}
	if none, err := s.FindBySourceEvent(ctx, "none"); err != nil || len(none) != 0 {
		t.Fatalf("find none: %v %v", none, err)
	}
	st, err := s.Stats(ctx, persistence.SourceWalletOutbox, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// w3 is delivering and due since 300; w2 retryable until 5000; w1 failed.
	if st.Delivering != 1 || st.Retryable != 1 || st.Failed != 1 || st.OldestDueMs != 300 {
		t.Fatalf("wallet stats %+v", st)
	}
	st, _ = s.Stats(ctx, persistence.SourceWalletOutbox, 6000)
	if st.OldestDueMs != 300 {
		t.Fatalf("stats at 6000 %+v", st)
	}
	st, _ = s.Stats(ctx, persistence.SourceRoomOutbox, 1000)
	if st.Delivering != 3 || st.Retryable != 0 || st.Failed != 0 || st.OldestDueMs != 150 {
		t.Fatalf("room stats %+v", st)
	}
	if st, _ := s.Stats(ctx, "nothing", 1000); st != (persistence.NoticeStats{}) {
		t.Fatalf("empty source stats %+v", st)
	}
}

func testNoticeSources(t *testing.T, s persistence.NoticeStore) {
	ntIngest(t, s, 1000, ntRow(persistence.SourceWalletOutbox, "w1", 100), ntRow(persistence.SourceRoomOutbox, "r1", 50))
	rows := ntClaim(t, s, persistence.SourceWalletOutbox, ntOwnerA, 1000, 100, 10)
	if !slices.Equal(ntIDs(rows), []string{"w1"}) {
		t.Fatalf("wallet claim got %v", ntIDs(rows))
	}
	rows = ntClaim(t, s, persistence.SourceRoomOutbox, ntOwnerA, 1000, 100, 10)
	if !slices.Equal(ntIDs(rows), []string{"r1"}) {
		t.Fatalf("room claim got %v", ntIDs(rows))
	}
}

func testNoticeCursor(t *testing.T, s persistence.NoticeStore) {
	ctx := context.Background()
	const src = persistence.SourceRoomOutbox
	c, held, err := s.ClaimCursor(ctx, src, ntOwnerA, 1000, 100)
	if err != nil || !held || c != (persistence.NoticeCursor{}) {
		t.Fatalf("first claim: %+v %v %v", c, held, err)
	}
	if _, held, err := s.ClaimCursor(ctx, src, ntOwnerB, 1050, 100); err != nil || held {
		t.Fatalf("B claimed a held cursor: %v %v", held, err)
	}
	if err := s.SaveCursor(ctx, src, ntOwnerA, persistence.NoticeCursor{Num: 500, Key: "ev-5"}, 1060); err != nil {
		t.Fatal(err)
	}
	// A non-holder's save is dropped.
	if err := s.SaveCursor(ctx, src, ntOwnerB, persistence.NoticeCursor{Num: 9}, 1060); err != nil {
		t.Fatal(err)
	}
	// A renews its own lease and reads its cursor.
	if c, held, err := s.ClaimCursor(ctx, src, ntOwnerA, 1080, 100); err != nil || !held || c != (persistence.NoticeCursor{Num: 500, Key: "ev-5"}) {
		t.Fatalf("renew: %+v %v %v", c, held, err)
	}
	if _, held, _ := s.ClaimCursor(ctx, src, ntOwnerB, 1150, 100); held {
		t.Fatal("renewed lease was taken before it expired")
	}
	c, held, err = s.ClaimCursor(ctx, src, ntOwnerB, 1180, 100)
	if err != nil || !held || c != (persistence.NoticeCursor{Num: 500, Key: "ev-5"}) {
		t.Fatalf("takeover after expiry: %+v %v %v", c, held, err)
	}
	if err := s.SaveCursor(ctx, src, ntOwnerA, persistence.NoticeCursor{Num: 1}, 1190); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := s.ClaimCursor(ctx, src, ntOwnerB, 1200, 100); c.Num != 500 {
		t.Fatalf("the old holder's save went through: %+v", c)
	}
	// Cursors are per source.
	if c, held, err := s.ClaimCursor(ctx, persistence.SourceWalletOutbox, ntOwnerA, 1200, 100); err != nil || !held || c != (persistence.NoticeCursor{}) {
		t.Fatalf("other source: %+v %v %v", c, held, err)
	}
}

func testNoticeConcurrentClaims(t *testing.T, s persistence.NoticeStore) {
	const src, n, owners = persistence.SourceWalletOutbox, 200, 4
	var rows []persistence.NoticeDelivery
	for i := range n {
		rows = append(rows, ntRow(src, fmt.Sprintf("e%03d", i), int64(i)))
	}
	ntIngest(t, s, 1000, rows...)
	var (
		mu   sync.Mutex
		seen = map[string]string{}
		wg   sync.WaitGroup
		errs = make(chan error, owners)
	)
	for o := range owners {
		owner := fmt.Sprint("node-", o)
		wg.Go(func() {
			for {
				got, err := s.Claim(context.Background(), src, owner, 1000, 60_000, 7)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, d := range got {
					if prev, dup := seen[d.SourceEventID]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("%s claimed by %s and %s", d.SourceEventID, prev, owner)
						return
					}
					seen[d.SourceEventID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("%d rows claimed, want %d", len(seen), n)
	}
}

// RoomOutboxAfterFunc is a backend's read-only scan of room_outbox for the
// notice workers (memdb.Store.RoomOutboxAfter, mysql's RoomOutboxReader).
type RoomOutboxAfterFunc func(ctx context.Context, eventType string, afterMs int64, afterID string, limit int) ([]persistence.OutboxRow, error)

// RunRoomOutboxAfter checks a backend's room_outbox scan: rows of one
// type in (created_at_ms, event_id) order after the cursor, pending and
// published alike, without touching the rows. newStore returns an empty
// room store and the scan reading the same rows.
func RunRoomOutboxAfter(t *testing.T, newStore func(t *testing.T) (persistence.Store, RoomOutboxAfterFunc)) {
	t.Helper()
	s, scan := newStore(t)
	ctx := context.Background()
	const kicked, joined = "RoomUserKicked", "RoomUserJoined"
	// Three rooms; kicks at 100 (two rows, ids break the tie), 200, 300,
	// joins in between.
	add := func(room string, seq int64, created int64, types ...string) {
		t.Helper()
		rec := persistence.CommandRecord{AppCode: ntApp, RoomID: room, Seq: seq, CommandID: fmt.Sprint("c-", room, seq), CommandType: "KickUser", CreatedAtMs: created}
		for i, ty := range types {
			rec.Events = append(rec.Events, persistence.Envelope{EventID: fmt.Sprintf("%s:%d:%d", room, seq, i), EventType: ty,
				AppCode: ntApp, RoomID: room, RoomSeq: seq, CommandID: rec.CommandID, CreatedAtMs: created, Payload: json.RawMessage(`{"target_user_id":"x"}`)})
		}
		if err := s.Append(ctx, persistence.Append{Command: rec}); err != nil {
			t.Fatal(err)
		}
	}
	add("b", 1, 100, kicked)
	add("a", 1, 100, joined, kicked)
	add("a", 2, 200, kicked)
	add("c", 1, 150, joined)
	add("c", 2, 300, kicked, joined)
	if err := s.MarkOutboxPublished(ctx, "a:1:1", 500); err != nil { // the relay is done with it
		t.Fatal(err)
	}
	ids := func(rows []persistence.OutboxRow) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = r.Envelope.EventID
		}
		return out
	}
	all, err := scan(ctx, kicked, 0, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a:1:1", "b:1:0", "a:2:0", "c:2:0"}
	if !slices.Equal(ids(all), want) {
		t.Fatalf("scan from zero %v, want %v", ids(all), want)
	}
	if all[0].CreatedAtMs != 100 || all[0].Envelope.EventType != kicked || all[0].Status != persistence.OutboxPublished || string(all[0].Envelope.Payload) != `{"target_user_id":"x"}` {
		t.Fatalf("row %+v", all[0])
	}
	page, err := scan(ctx, kicked, 100, "a:1:1", 2)
	if err != nil || !slices.Equal(ids(page), []string{"b:1:0", "a:2:0"}) {
		t.Fatalf("page after a:1:1: %v %v", ids(page), err)
	}
	page, err = scan(ctx, kicked, 200, "a:2:0", 10)
	if err != nil || !slices.Equal(ids(page), []string{"c:2:0"}) {
		t.Fatalf("page after a:2:0: %v %v", ids(page), err)
	}
	if page, err := scan(ctx, kicked, 300, "c:2:0", 10); err != nil || len(page) != 0 {
		t.Fatalf("page at the end: %v %v", ids(page), err)
	}
	if page, err := scan(ctx, joined, 0, "", 10); err != nil || !slices.Equal(ids(page), []string{"a:1:0", "c:1:0", "c:2:1"}) {
		t.Fatalf("joins: %v %v", ids(page), err)
	}
	// Reading changed nothing.
	if row, err := s.GetOutbox(ctx, "b:1:0"); err != nil || row.Status != persistence.OutboxPending || row.RetryCount != 0 || row.LockedBy != "" {
		t.Fatalf("scan touched the row: %+v %v", row, err)
	}
}
