package notice_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

type fixture struct {
	store persistence.NoticeStore
	pub   *fakePublisher
	scan  *listScanner
	clock *clock
	w     *notice.Worker
}

func newFixture(t *testing.T, store persistence.NoticeStore, node string) *fixture {
	t.Helper()
	f := &fixture{store: store, pub: &fakePublisher{}, scan: &listScanner{}, clock: newClock()}
	f.w = f.worker(t, node, f.scan)
	return f
}

func (f *fixture) worker(t *testing.T, node string, sc notice.Scanner) *notice.Worker {
	t.Helper()
	w, err := notice.NewWorker(notice.Deps{
		Store: f.store, Publisher: f.pub, Config: workerConfig(), NodeID: node, Logger: quiet, Clock: f.clock.Now,
		Module: notice.Module{Name: "wallet_notice_worker", Source: persistence.SourceWalletOutbox, Scanner: sc},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (f *fixture) round(t *testing.T) notice.Result {
	t.Helper()
	res, err := f.w.Round(context.Background())
	if err != nil {
		t.Fatalf("round: %v", err)
	}
	return res
}

// delivering → delivered: the scan ingests, the claim leases, the send
// carries exactly the row's user, ext, payload and event id, the mark
// records delivered.
func TestRoundDelivers(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
		f := newFixture(t, newStore(t), "n1")
		a, b := delivery("tx1:WalletBalanceChanged:u1:COIN", "u1", 100), delivery("tx2:WalletBalanceChanged:u2:COIN", "u2", 200)
		f.scan.add(a, b)
		res := f.round(t)
		if res.Scanned != 2 || res.Ingested != 2 || res.Claimed != 2 || res.Delivered != 2 || res.Retryable+res.Failed+res.StoreErrors != 0 {
			t.Fatalf("round %+v", res)
		}
		for _, d := range []persistence.NoticeDelivery{a, b} {
			got := get(t, f.store, d.SourceEventID)
			if got.Status != persistence.NoticeDelivered || got.RetryCount != 0 || got.LockedBy != "" || got.Ingress != persistence.IngressPoll ||
				got.DeliveredAtMs != f.clock.Now().UnixMilli() || string(got.Payload) != string(d.Payload) {
				t.Fatalf("row after delivery %+v", got)
			}
			if f.pub.count(d.SourceEventID) != 1 {
				t.Fatalf("%s sent %d times", d.SourceEventID, f.pub.count(d.SourceEventID))
			}
		}
		s := f.pub.sends()[0]
		if s.AppCode != "lalu" || s.Ext != "wallet_notice" || (s.UserID != "u1" && s.UserID != "u2") || !strings.Contains(s.Data, s.UserID) {
			t.Fatalf("send %+v", s)
		}
		// Nothing is due any more.
		if res := f.round(t); res.Claimed != 0 || len(f.pub.sends()) != 2 {
			t.Fatalf("second round %+v after %d sends", res, len(f.pub.sends()))
		}
	})
}

// delivering → retryable → (not before next_retry_at_ms) → delivered.
func TestRoundRetryableThenDelivered(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
		f := newFixture(t, newStore(t), "n1")
		f.pub.fail = func(_ string, attempt int) error {
			if attempt == 1 {
				return errors.New("tencent im openim/sendmsg: (transport): timeout sig=SECRET")
			}
			return nil
		}
		f.scan.add(delivery("e1", "u1", 100))
		now := f.clock.Now()
		if res := f.round(t); res.Retryable != 1 || res.Delivered != 0 {
			t.Fatalf("round %+v", res)
		}
		got := get(t, f.store, "e1")
		cfg := workerConfig()
		lo, hi := now.Add(cfg.PollInterval*2/2).UnixMilli(), now.Add(cfg.PollInterval*2).UnixMilli()
		if got.Status != persistence.NoticeRetryable || got.RetryCount != 1 || got.NextRetryAtMs < lo || got.NextRetryAtMs > hi || got.LockedBy != "" {
			t.Fatalf("retryable row %+v (next retry want in [%d, %d])", got, lo, hi)
		}
		if !strings.Contains(got.LastError, "timeout") || strings.Contains(got.LastError, "SECRET") {
			t.Fatalf("last_error %q: want the reason without the secret", got.LastError)
		}
		f.clock.Add(time.Millisecond)
		if res := f.round(t); res.Claimed != 0 && got.NextRetryAtMs > f.clock.Now().UnixMilli() {
			t.Fatalf("claimed before next_retry_at_ms: %+v", res)
		}
		f.clock.Add(cfg.PollInterval * 2)
		if res := f.round(t); res.Delivered != 1 {
			t.Fatalf("retry round %+v", res)
		}
		got = get(t, f.store, "e1")
		if got.Status != persistence.NoticeDelivered || got.RetryCount != 1 || f.pub.count("e1") != 2 {
			t.Fatalf("after retry %+v, %d sends", got, f.pub.count("e1"))
		}
	})
}

// delivering → retryable ×max_retry_count → failed; a dead letter is never
// attempted again; requeue → retryable → delivered.
func TestRoundDeadLetterAndRequeue(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
		f := newFixture(t, newStore(t), "n1")
		broken := true
		f.pub.fail = func(string, int) error {
			if broken {
				return errors.New("im: 80001 rejected")
			}
			return nil
		}
		f.scan.add(delivery("e1", "u1", 100))
		cfg := workerConfig()
		for attempt := 1; attempt <= cfg.MaxRetryCount+1; attempt++ {
			res := f.round(t)
			if res.Claimed != 1 {
				t.Fatalf("attempt %d: round %+v", attempt, res)
			}
			got := get(t, f.store, "e1")
			want := persistence.NoticeRetryable
			if attempt > cfg.MaxRetryCount {
				want = persistence.NoticeFailed
			}
			if got.Status != want || got.RetryCount != attempt {
				t.Fatalf("after attempt %d: %s retry_count %d, want %s %d", attempt, got.Status, got.RetryCount, want, attempt)
			}
			f.clock.Add(cfg.MaxBackoff)
		}
		if n := f.pub.count("e1"); n != cfg.MaxRetryCount+1 {
			t.Fatalf("%d attempts, want 1 + max_retry_count = %d", n, cfg.MaxRetryCount+1)
		}
		for range 3 {
			f.clock.Add(time.Hour)
			if res := f.round(t); res.Claimed != 0 {
				t.Fatalf("a dead letter was attempted again: %+v", res)
			}
		}
		st, err := f.store.Stats(context.Background(), persistence.SourceWalletOutbox, f.clock.Now().UnixMilli())
		if err != nil || st.Failed != 1 || st.OldestDueMs != 0 {
			t.Fatalf("stats %+v %v", st, err)
		}
		broken = false
		req, err := f.store.Requeue(context.Background(), get(t, f.store, "e1").NoticeKey, f.clock.Now().UnixMilli())
		if err != nil || req.Status != persistence.NoticeRetryable || req.RetryCount != 0 || req.RequeueCount != 1 {
			t.Fatalf("requeue %+v %v", req, err)
		}
		if res := f.round(t); res.Delivered != 1 {
			t.Fatalf("round after requeue %+v", res)
		}
		got := get(t, f.store, "e1")
		if got.Status != persistence.NoticeDelivered || got.RequeueCount != 1 || got.RequeuedAtMs == 0 || got.LastError == "" {
			t.Fatalf("delivered after requeue %+v", got)
		}
	})
}

// A row leased by an instance that died is left alone until its lease
// ends, then another instance reclaims and delivers it.
func TestRoundReclaimsExpiredLease(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
		f := newFixture(t, newStore(t), "n2")
		ctx := context.Background()
		now := f.clock.Now().UnixMilli()
		if _, err := f.store.Ingest(ctx, []persistence.NoticeDelivery{delivery("e1", "u1", 100)}, now); err != nil {
			t.Fatal(err)
		}
		lease := workerConfig().LockTTL
		if rows, err := f.store.Claim(ctx, persistence.SourceWalletOutbox, "dead-node/1", now, lease.Milliseconds(), 10); err != nil || len(rows) != 1 {
			t.Fatalf("dead node's claim: %v %v", rows, err)
		}
		f.clock.Add(lease - time.Millisecond)
		if res := f.round(t); res.Claimed != 0 || len(f.pub.sends()) != 0 {
			t.Fatalf("a live lease was taken: %+v", res)
		}
		f.clock.Add(time.Millisecond)
		if res := f.round(t); res.Delivered != 1 {
			t.Fatalf("reclaim round %+v", res)
		}
		if got := get(t, f.store, "e1"); got.Status != persistence.NoticeDelivered || got.RetryCount != 0 {
			t.Fatalf("reclaimed row %+v", got)
		}
	})
}

// A row that can never be sent (no recipient) is failed at once, without
// a send; a corrupt source event ingested as failed is never sent.
func TestRoundCorruptRows(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
		f := newFixture(t, newStore(t), "n1")
		noUser := delivery("e1", "", 100)
		corrupt := delivery("e2", "u2", 100)
		corrupt.Status, corrupt.LastError = persistence.NoticeFailed, "corrupt source event: payload"
		f.scan.add(noUser, corrupt)
		res := f.round(t)
		if res.Ingested != 2 || res.Claimed != 1 || res.Failed != 1 || len(f.pub.sends()) != 0 {
			t.Fatalf("round %+v, %d sends", res, len(f.pub.sends()))
		}
		if got := get(t, f.store, "e1"); got.Status != persistence.NoticeFailed || !strings.Contains(got.LastError, "corrupt") {
			t.Fatalf("row without user %+v", got)
		}
		if got := get(t, f.store, "e2"); got.Status != persistence.NoticeFailed || got.LastError != corrupt.LastError {
			t.Fatalf("corrupt row %+v", got)
		}
	})
}

// Only one instance scans a source at a time (the cursor lease); the
// other still delivers. The scanner restarts from the stored cursor when
// the lease comes to it.
func TestScanLease(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
		f := newFixture(t, newStore(t), "n1")
		other := &listScanner{}
		w2 := f.worker(t, "n2", other)
		f.scan.add(delivery("e1", "u1", 100))
		f.round(t)
		other.add(delivery("e2", "u2", 100))
		if res, err := w2.Round(context.Background()); err != nil || res.Scanned != 0 {
			t.Fatalf("second instance scanned under the first one's lease: %+v %v", res, err)
		}
		f.clock.Add(workerConfig().LockTTL)
		res, err := w2.Round(context.Background())
		if err != nil || res.Scanned != 1 || res.Delivered != 1 {
			t.Fatalf("after the lease expired: %+v %v", res, err)
		}
		if len(other.resets) != 1 || other.resets[0] != (persistence.NoticeCursor{Num: 1}) {
			t.Fatalf("second scanner was reset to %v, want the first one's saved cursor {1}", other.resets)
		}
	})
}

// A lost lease: the slow instance's late failure does not reopen a row
// another instance delivered.
func TestLateFailureAfterReclaim(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
		f := newFixture(t, newStore(t), "n1")
		f.scan.add(delivery("e1", "u1", 100))
		release := make(chan struct{})
		f.pub.fail = func(_ string, attempt int) error {
			if attempt == 1 {
				<-release
				return errors.New("slow and failed")
			}
			return nil
		}
		done := make(chan notice.Result)
		go func() {
			res, _ := f.w.Round(context.Background())
			done <- res
		}()
		// While n1 is stuck in its send, its lease runs out and n2 takes
		// the row over and delivers it.
		eventually(t, "n1's send", func() bool { return f.pub.count("e1") == 1 })
		f.clock.Add(workerConfig().LockTTL)
		w2 := f.worker(t, "n2", nil)
		res, err := w2.Round(context.Background())
		if err != nil || res.Delivered != 1 {
			t.Fatalf("n2's round %+v %v", res, err)
		}
		close(release)
		late := <-done
		if late.StoreErrors != 1 || late.Retryable != 0 {
			t.Fatalf("n1's late failure: %+v (want one refused mark)", late)
		}
		if got := get(t, f.store, "e1"); got.Status != persistence.NoticeDelivered {
			t.Fatalf("row is %s", got.Status)
		}
	})
}

// Publisher panics are re-raised after the round settles the other sends;
// the panicking row keeps its lease.
func TestRoundPanicIsRaisedAfterSettling(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
		f := newFixture(t, newStore(t), "n1")
		f.pub.fail = func(id string, _ int) error {
			if id == "boom" {
				panic("publisher bug")
			}
			return nil
		}
		f.scan.add(delivery("ok", "u1", 100), delivery("boom", "u2", 100))
		var p any
		func() {
			defer func() { p = recover() }()
			_, _ = f.w.Round(context.Background())
		}()
		var pe *supervise.PanicError
		if err, ok := p.(error); !ok || !errors.As(err, &pe) || fmt.Sprint(pe.Value) != "publisher bug" {
			t.Fatalf("round recovered %v, want a *supervise.PanicError", p)
		}
		if got := get(t, f.store, "ok"); got.Status != persistence.NoticeDelivered {
			t.Fatalf("the other row is %s", got.Status)
		}
		if got := get(t, f.store, "boom"); got.Status != persistence.NoticeDelivering || got.LockedBy == "" {
			t.Fatalf("panicking row %+v: want it still leased", got)
		}
	})
}

// Store errors are classed: a mark on a row that is gone is ErrNotFound,
// not a silent success.
func TestRequeueUnknownIsNotFound(t *testing.T) {
	backends(t, func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore) {
		s := newStore(t)
		if _, err := s.Requeue(context.Background(), delivery("x", "u", 1).NoticeKey, 1); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("requeue unknown: %v", err)
		}
	})
}

func TestBackoff(t *testing.T) {
	cfg := workerConfig()
	cfg.PollInterval, cfg.MaxBackoff = 500*time.Millisecond, 5*time.Minute
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 20: 5 * time.Minute, 100: 5 * time.Minute} {
		for range 50 {
			got := notice.Backoff(cfg, n)
			if got < want/2 || got >= want {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s)", n, got, want/2, want)
			}
		}
	}
}

// A worker takes its section as given: a field left unset in a section
// built in code is refused, naming the worker's key, rather than run as
// zero or quietly defaulted a second time.
func TestUnsetConfigIsRefused(t *testing.T) {
	for _, tc := range []struct {
		key   string
		unset func(*configs.NoticeWorkerConfig)
	}{
		{"notice.wallet_notice_worker.poll_interval", func(c *configs.NoticeWorkerConfig) { c.PollInterval = 0 }},
		{"notice.wallet_notice_worker.batch_size", func(c *configs.NoticeWorkerConfig) { c.BatchSize = 0 }},
		{"notice.wallet_notice_worker.max_retry_count", func(c *configs.NoticeWorkerConfig) { c.MaxRetryCount = 0 }},
		{"notice.wallet_notice_worker.send_concurrency", func(c *configs.NoticeWorkerConfig) { c.SendConcurrency = 0 }},
	} {
		cfg := workerConfig()
		tc.unset(&cfg)
		_, err := notice.NewWorker(notice.Deps{Store: memdb.NewNoticeStore(), Publisher: &fakePublisher{}, Config: cfg,
			Module: notice.Module{Name: "wallet_notice_worker", Source: persistence.SourceWalletOutbox, Scanner: &listScanner{}}})
		var ce *configs.Error
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("NewWorker: %v, want a config error on %s", err, tc.key)
		}
	}
}
