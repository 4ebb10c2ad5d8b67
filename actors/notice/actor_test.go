package notice_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/actors/supervise/supervisetest"
	"github.com/hyapp/roomcell/internal/logtest"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// syncBuffer is a log sink the logging goroutines write while the test reads.
type syncBuffer = logtest.Buffer

func startWorker(t *testing.T, deps notice.Deps) *supervise.Poller[notice.RoundResult] {
	t.Helper()
	sys := newSystem(t)
	r, err := notice.Start(newSupervisor(t, sys, "workers-"+deps.NodeID), deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(10 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return r
}

// The supervised actor polls: what the scan finds is delivered without
// anyone asking, a backlog drains without waiting for the poll, and a
// Kick runs a round at once.
func TestActorPollsAndDrains(t *testing.T) {
	store := memdb.NewNoticeStore()
	t.Cleanup(func() { _ = store.Close() })
	pub, scan := &fakePublisher{}, &listScanner{}
	cfg := workerConfig()
	cfg.BatchSize, cfg.PollInterval, cfg.MaxBackoff = 10, time.Hour, time.Hour // only a full round or a kick runs the next one
	for i := range 35 {
		scan.add(delivery(string(rune('a'+i%26))+strings.Repeat("x", i/26), "u", int64(i)))
	}
	r := startWorker(t, notice.Deps{Store: store, Publisher: pub, Config: cfg, NodeID: "n1", Logger: quiet,
		Module: notice.Module{Name: "wallet_notice_worker", Source: persistence.SourceWalletOutbox, Scanner: scan}})
	eventually(t, "the backlog of 35 to drain without a poll", func() bool { return len(pub.sends()) == 35 })
	scan.add(delivery("late", "u", 99))
	time.Sleep(100 * time.Millisecond)
	if n := pub.count("late"); n != 0 {
		t.Fatalf("sent before the poll or a kick: %d", n)
	}
	r.Kick()
	r.Kick() // coalesced
	eventually(t, "the kicked round", func() bool { return pub.count("late") == 1 })
	eventually(t, "delivered mark", func() bool {
		d, err := store.Get(context.Background(), delivery("late", "", 0).NoticeKey)
		return err == nil && d.Status == persistence.NoticeDelivered
	})
}

// A panic in the publisher restarts the actor (logged with its stack);
// the row it panicked on keeps its lease and is delivered after lock_ttl.
func TestActorRestartsAfterPanic(t *testing.T) {
	store := memdb.NewNoticeStore()
	t.Cleanup(func() { _ = store.Close() })
	var once sync.Once
	pub := &fakePublisher{fail: func(id string, _ int) error {
		once.Do(func() { panic("publisher bug") })
		return nil
	}}
	scan := &listScanner{}
	scan.add(delivery("e1", "u1", 1))
	cfg := workerConfig()
	cfg.LockTTL, cfg.SendTimeout = 500*time.Millisecond, 100*time.Millisecond
	sys := newSystem(t)
	var logs syncBuffer
	defer supervise.LogEvents(sys, slog.New(slog.NewTextHandler(&logs, nil)))()
	r, err := notice.Start(newSupervisor(t, sys, "workers"), notice.Deps{Store: store, Publisher: pub, Config: cfg, NodeID: "n1",
		Logger: quiet, Module: notice.Module{Name: "wallet_notice_worker", Source: persistence.SourceWalletOutbox, Scanner: scan}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(10 * time.Second)
	eventually(t, "delivery after the restart and the lease", func() bool {
		d, err := store.Get(context.Background(), delivery("e1", "", 0).NoticeKey)
		return err == nil && d.Status == persistence.NoticeDelivered
	})
	if pub.count("e1") != 2 {
		t.Fatalf("e1 sent %d times, want 2 (the panic, then the retry)", pub.count("e1"))
	}
	eventually(t, "the supervisor log", func() bool { return strings.Contains(logs.String(), "publisher bug") })
	if out := logs.String(); !strings.Contains(out, "RestartDirective") || !strings.Contains(out, "wallet_notice_worker") {
		t.Fatalf("supervisor log: %s", out)
	}
}

// Stop lets the send in flight finish with its mark and releases the
// claimed rows it did not start, so another instance can take them at
// once instead of after lock_ttl.
func TestActorStopReleasesUnstarted(t *testing.T) {
	store := memdb.NewNoticeStore()
	t.Cleanup(func() { _ = store.Close() })
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	pub := &fakePublisher{fail: func(string, int) error {
		started <- struct{}{}
		<-release
		return nil
	}}
	scan := &listScanner{}
	for _, id := range []string{"e1", "e2", "e3"} {
		scan.add(delivery(id, "same-user", 1)) // one user: one lane, in order
	}
	cfg := workerConfig()
	cfg.LockTTL = time.Hour
	sys := newSystem(t)
	r, err := notice.Start(newSupervisor(t, sys, "workers"), notice.Deps{Store: store, Publisher: pub, Config: cfg, NodeID: "n1",
		Logger: quiet, Module: notice.Module{Name: "wallet_notice_worker", Source: persistence.SourceWalletOutbox, Scanner: scan}})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	stopped := make(chan error)
	go func() { stopped <- r.Stop(10 * time.Second) }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if n := len(pub.sends()); n != 1 {
		t.Fatalf("%d sends, want only the one in flight", n)
	}
	first, second := delivery("e1", "", 0), delivery("e2", "", 0)
	if d, _ := store.Get(context.Background(), first.NoticeKey); d.Status != persistence.NoticeDelivered {
		t.Fatalf("in-flight row is %s, want delivered", d.Status)
	}
	d, _ := store.Get(context.Background(), second.NoticeKey)
	if d.Status != persistence.NoticeDelivering || d.LockedBy != "" || d.LockUntilMs != 0 {
		t.Fatalf("unstarted row %+v, want released", d)
	}
	rows, err := store.Claim(context.Background(), persistence.SourceWalletOutbox, "n2", time.Now().UnixMilli(), 1000, 10)
	if err != nil || len(rows) != 2 {
		t.Fatalf("another instance claimed %d rows at once, want 2 (%v)", len(rows), err)
	}
}

// panickyScanner panics on its first n scans, then scans as the list.
type panickyScanner struct {
	*listScanner
	n     int64
	calls atomic.Int64
}

func (s *panickyScanner) Scan(ctx context.Context, nowMs int64, limit int) (notice.ScanResult, error) {
	if s.calls.Add(1) <= s.n {
		panic("scanner bug")
	}
	return s.listScanner.Scan(ctx, nowMs, limit)
}

// For the notice worker: a round that panics 100 times in
// a row, then recovers. The worker supervisor restarts it every time (no
// OneForOne limit), with its backoff; the restarts are counted in Health
// and roomcell_worker_restarts_total{worker}; the worker is reported down
// while it waits (roomcell_workers_down); afterwards it delivers everything.
func TestNoticeWorkerSurvivesRepeatedPanics(t *testing.T) {
	store := memdb.NewNoticeStore()
	t.Cleanup(func() { _ = store.Close() })
	const panics = 100
	pub, scan := &fakePublisher{}, &panickyScanner{listScanner: &listScanner{}, n: panics}
	for i := range 20 {
		scan.add(delivery(fmt.Sprint("d", i), "u", int64(i)))
	}
	sup, reg := supervisetest.NewSupervisor(t, newSystem(t))
	const name = "wallet_notice_worker"
	stopWatch := supervisetest.WatchDown(sup.Health(), name)
	// A crashed incarnation's scan cursor lease must expire before the
	// next one scans: short here, so 100 crashes take seconds.
	cfg := workerConfig()
	cfg.LockTTL, cfg.SendTimeout = 30*time.Millisecond, 10*time.Millisecond
	r, err := notice.Start(sup, notice.Deps{Store: store, Publisher: pub, Config: cfg, NodeID: "n1", Logger: quiet,
		Module: notice.Module{Name: name, Source: persistence.SourceWalletOutbox, Scanner: scan}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(5 * time.Second) })
	eventually(t, "every notice sent after the panics", func() bool { return len(pub.sends()) == 20 })
	sawDown := stopWatch()
	if c := scan.calls.Load(); c <= panics {
		t.Fatalf("%d scans, want more than the %d that panicked", c, panics)
	}
	supervisetest.CheckRecovered(t, sup, reg, r, name, panics, sawDown)
	res, err := r.RunNow(5 * time.Second)
	if err != nil || res.Err != nil {
		t.Fatalf("RunNow after recovery: %v %v", err, res.Err)
	}
}
