package walletnotice_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
)

// countStatus counts the backlog's notice rows in status.
func (b *backlog) countStatus(t testing.TB, status string) int {
	t.Helper()
	var n int
	if err := b.check.DB().QueryRow("SELECT COUNT(*) FROM notice_delivery_events WHERE status = ?", status).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An IM outage long enough to exhaust every retry turns a backlog of
// 10,000 wallet notices into dead letters; once IM is back, one bulk
// requeue through the operators' API (dry run first) takes them all back,
// and two notice instances deliver each exactly once: the fake IM holds
// every event once, with no duplicate send, and every row records one
// requeue.
func TestBulkRequeueAfterOutageDeliversEachOnce(t *testing.T) {
	const events, users = 10_000, 1000
	b := newBacklog(t, events, users)
	cfg := backlogConfig()
	cfg.WalletNoticeWorker.MaxRetryCount = 1
	cfg.WalletNoticeWorker.MaxBackoff = 100 * time.Millisecond
	b.fake.FailFor(time.Hour)
	a := b.start(t, "notice-a", cfg, 0)
	c := b.start(t, "notice-b", cfg, 0)

	deadline := time.Now().Add(3 * time.Minute)
	for b.countStatus(t, persistence.NoticeFailed) < events {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d notices dead after the outage's retries", b.countStatus(t, persistence.NoticeFailed), events)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(b.fake.EventIDCounts()); n != 0 {
		t.Fatalf("%d events reached IM during the outage", n)
	}
	b.fake.FailFor(0)
	callsBefore := b.fake.CallCount(tencentim.APISendMsg)

	admin := grpcapi.NewNoticeAdminServer(b.check, func(source string) bool { return a.svc.Kick(source) }, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	sel := &roomcellv1.NoticeSelector{SourceName: persistence.SourceWalletOutbox, ErrorContains: "503"}
	dry, err := admin.BulkRequeueNotices(ctx, &roomcellv1.BulkRequeueNoticesRequest{Selector: sel, DryRun: true})
	if err != nil || dry.GetCount() != events {
		t.Fatalf("dry run: %v %v; want %d", dry, err, events)
	}
	if n := b.countStatus(t, persistence.NoticeFailed); n != events {
		t.Fatalf("the dry run changed rows: %d failed left", n)
	}
	start := time.Now()
	got, err := admin.BulkRequeueNotices(ctx, &roomcellv1.BulkRequeueNoticesRequest{Selector: sel})
	if err != nil || got.GetCount() != events || !got.GetWorkerNotified() {
		t.Fatalf("bulk requeue: %v %v", got, err)
	}
	requeueTook := time.Since(start)
	took := b.waitDelivered(t, 3*time.Minute)
	if dups := b.checkFake(t); dups != 0 {
		t.Fatalf("%d duplicate sends after the bulk requeue", dups)
	}
	sent := b.fake.CallCount(tencentim.APISendMsg) - callsBefore
	if sent != events {
		t.Fatalf("%d sendmsg calls after the requeue, want %d", sent, events)
	}
	var once int
	if err := b.check.DB().QueryRow("SELECT COUNT(*) FROM notice_delivery_events WHERE requeue_count = 1 AND status = 'delivered'").Scan(&once); err != nil || once != events {
		t.Fatalf("%d rows delivered with one requeue recorded (%v), want %d", once, err, events)
	}
	t.Logf("%d dead letters requeued in one call (%s), all delivered %s later by a (%d) and b (%d); %d sendmsg calls after the requeue",
		events, requeueTook.Round(time.Millisecond), took.Round(time.Millisecond), a.sent.Load(), c.sent.Load(), sent)
}
