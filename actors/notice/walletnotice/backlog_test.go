package walletnotice_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/notice/noticeapp"
	"github.com/hyapp/roomcell/actors/notice/noticetest"
	"github.com/hyapp/roomcell/actors/notice/roomnotice"
	"github.com/hyapp/roomcell/actors/notice/walletnotice"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// instance is one notice process: its own pool, publisher, actor system
// and notice role. dead simulates kill -9: from then on its store and its
// IM calls fail at once, so what it sent but did not mark stays leased.
type instance struct {
	name  string
	store *mysql.NoticeStore
	svc   *noticeapp.Service
	sys   *actor.ActorSystem
	sent  atomic.Int64
	dead  atomic.Bool
}

var errDead = fmt.Errorf("process killed: %w", persistence.ErrUnavailable)

// deadStore fails every call once the instance is dead.
type deadStore struct {
	persistence.NoticeStore
	in *instance
}

func (d deadStore) check() error {
	if d.in.dead.Load() {
		return errDead
	}
	return nil
}

func (d deadStore) Ingest(ctx context.Context, rows []persistence.NoticeDelivery, nowMs int64) (int, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	return d.NoticeStore.Ingest(ctx, rows, nowMs)
}

func (d deadStore) Claim(ctx context.Context, source, owner string, nowMs, leaseMs int64, limit int) ([]persistence.NoticeDelivery, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.NoticeStore.Claim(ctx, source, owner, nowMs, leaseMs, limit)
}

func (d deadStore) MarkDelivered(ctx context.Context, keys []persistence.NoticeKey, nowMs int64) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.NoticeStore.MarkDelivered(ctx, keys, nowMs)
}

func (d deadStore) MarkRetryable(ctx context.Context, k persistence.NoticeKey, owner string, n int, e string, next, now int64) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.NoticeStore.MarkRetryable(ctx, k, owner, n, e, next, now)
}

func (d deadStore) MarkFailed(ctx context.Context, k persistence.NoticeKey, owner string, n int, e string, now int64) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.NoticeStore.MarkFailed(ctx, k, owner, n, e, now)
}

func (d deadStore) Release(ctx context.Context, keys []persistence.NoticeKey, owner string, nowMs int64) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.NoticeStore.Release(ctx, keys, owner, nowMs)
}

func (d deadStore) ClaimCursor(ctx context.Context, source, owner string, nowMs, leaseMs int64) (persistence.NoticeCursor, bool, error) {
	if err := d.check(); err != nil {
		return persistence.NoticeCursor{}, false, err
	}
	return d.NoticeStore.ClaimCursor(ctx, source, owner, nowMs, leaseMs)
}

func (d deadStore) SaveCursor(ctx context.Context, source, owner string, c persistence.NoticeCursor, nowMs int64) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.NoticeStore.SaveCursor(ctx, source, owner, c, nowMs)
}

// countingPublisher counts an instance's sends and kills it at the
// killAt-th one (0 = never).
type countingPublisher struct {
	inner  notice.Publisher
	in     *instance
	killAt int64
}

func (p countingPublisher) SendNotice(ctx context.Context, appCode, toUserID, ext string, data []byte, eventID string) error {
	if p.in.dead.Load() {
		return errDead
	}
	err := p.inner.SendNotice(ctx, appCode, toUserID, ext, data, eventID)
	if err == nil && p.in.sent.Add(1) == p.killAt && p.killAt > 0 {
		p.in.dead.Store(true)
	}
	return err
}

type backlog struct {
	cfg   configs.MySQLConfig
	fake  *imfake.Server
	ids   []string
	check *mysql.NoticeStore
}

// newBacklog is a MariaDB database with events WalletBalanceChanged rows
// in wallet_outbox (for users distinct users) and a fake IM.
func newBacklog(t testing.TB, events, users int) *backlog {
	t.Helper()
	ctx := context.Background()
	cfg, _ := mysqltest.NewDatabase(t)
	if err := mysql.MigrateConfig(ctx, cfg, mysql.WalletSchema, cfg.WalletDatabase); err != nil {
		t.Fatal(err)
	}
	check, err := mysql.OpenNoticeStore(ctx, cfg, mysql.WithLogger(noticetest.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = check.Close() })
	ids, err := noticetest.InsertWalletBacklog(ctx, check.DB(), cfg.WalletDatabase, 0, events, users)
	if err != nil {
		t.Fatal(err)
	}
	fake, _ := noticetest.FakeIM(t)
	return &backlog{cfg: cfg, fake: fake, ids: ids, check: check}
}

func backlogConfig() configs.NoticeConfig {
	var c configs.NoticeConfig
	c.WalletNoticeWorker = configs.WithDefaults(configs.NoticeWorkerConfig{Enabled: true, PollInterval: 50 * time.Millisecond, BatchSize: 200,
		LockTTL: 10 * time.Second, MaxRetryCount: 10, MaxBackoff: time.Second, SendTimeout: 2 * time.Second, SendConcurrency: 16})
	return c
}

// start runs one notice instance against the backlog's database and fake.
func (b *backlog) start(t testing.TB, name string, cfg configs.NoticeConfig, killAt int64) *instance {
	t.Helper()
	ctx := context.Background()
	in := &instance{name: name}
	store, err := mysql.OpenNoticeStore(ctx, b.cfg, mysql.WithLogger(noticetest.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	in.store = store
	_, pub := imClient(t, b.fake)
	in.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return noticetest.Quiet }))
	sup, err := supervise.NewSupervisor(in.sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	in.svc, err = noticeapp.Start(sup, noticeapp.Deps{
		Config: cfg, Store: deadStore{store, in}, Modules: []noticeapp.Module{walletnotice.App(deadSource{store.WalletOutbox(), in}), roomnotice.App(nil)},
		Publisher: countingPublisher{pub, in, killAt}, NodeID: name, Logger: noticetest.Quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.stop() })
	return in
}

func (in *instance) stop() {
	if in.svc != nil {
		_ = in.svc.Stop(10 * time.Second)
		in.svc = nil
		in.sys.Shutdown()
		_ = in.store.Close()
	}
}

type deadSource struct {
	src interface {
		ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]persistence.WalletOutboxRecord, error)
	}
	in *instance
}

func (d deadSource) ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]persistence.WalletOutboxRecord, error) {
	if d.in.dead.Load() {
		return nil, errDead
	}
	return d.src.ListOutboxAfter(ctx, afterID, limit)
}

// imClient is a publisher of its own (its own HTTP client and account
// cache, as another process would have) aimed at fake.
func imClient(t testing.TB, fake *imfake.Server) (*tencentim.Client, notice.Publisher) {
	t.Helper()
	cfg := fake.ClientConfig()
	cfg.RatePerSecond, cfg.GroupRatePerSecond = 1_000_000, 1_000_000
	client, err := tencentim.New(cfg, tencentim.WithLogger(noticetest.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	pub := roomim.New(client, roomim.WithLogger(noticetest.Quiet))
	t.Cleanup(pub.Close)
	return client, pub
}

// waitDelivered waits until every row of the backlog is delivered.
func (b *backlog) waitDelivered(t testing.TB, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var n int
		if err := b.check.DB().QueryRow("SELECT COUNT(*) FROM notice_delivery_events WHERE status = 'delivered'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(b.ids) {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%d of %d notices delivered after %s", n, len(b.ids), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkFake checks that every event reached the fake IM exactly once as
// an accepted C2C wallet_notice, and returns the sends Tencent's dedupe
// window swallowed (a repeat of a send whose delivered mark was lost).
func (b *backlog) checkFake(t testing.TB) (duplicates int) {
	t.Helper()
	counts := b.fake.EventIDCounts()
	for _, id := range b.ids {
		if counts[id] != 1 {
			t.Fatalf("event %s reached IM %d times, want exactly 1", id, counts[id])
		}
	}
	if len(counts) != len(b.ids) {
		t.Fatalf("fake IM holds %d distinct events, want %d", len(counts), len(b.ids))
	}
	msgs := b.fake.Messages()
	for _, m := range msgs[:min(len(msgs), 50)] {
		if m.Kind != "c2c" || m.Ext != "wallet_notice" {
			t.Fatalf("message %+v is not a C2C wallet_notice", m)
		}
	}
	return b.fake.Duplicates()
}

// Two notice instances against one MariaDB and a backlog of 10,000 wallet
// events: every event reaches the fake IM exactly once, counted by
// event_id, with no duplicate send at all (none even for Tencent's dedupe
// to drop), and both instances take part.
func TestTwoInstancesDeliverBacklogExactlyOnce(t *testing.T) {
	const events, users = 10_000, 1000
	b := newBacklog(t, events, users)
	cfg := backlogConfig()
	a := b.start(t, "notice-a", cfg, 0)
	c := b.start(t, "notice-b", cfg, 0)
	took := b.waitDelivered(t, 3*time.Minute)
	dups := b.checkFake(t)
	calls := b.fake.CallCount(tencentim.APISendMsg)
	t.Logf("%d notices in %s (%.0f/s): instance a sent %d, b sent %d; %d sendmsg calls, %d duplicates",
		events, took.Round(time.Millisecond), float64(events)/took.Seconds(), a.sent.Load(), c.sent.Load(), calls, dups)
	if dups != 0 || calls != events || a.sent.Load()+c.sent.Load() != events {
		t.Fatalf("duplicates %d, sendmsg calls %d, sends %d+%d; want 0, %d, %d", dups, calls, a.sent.Load(), c.sent.Load(), events, events)
	}
	if a.sent.Load() == 0 || c.sent.Load() == 0 {
		t.Fatalf("one instance did all the work (a %d, b %d): the claims are not shared", a.sent.Load(), c.sent.Load())
	}
}

// The same with instance b killed in the middle of a batch (after its
// 1000th send): its leased rows and, if it held it, the scan cursor come
// back to a after lock_ttl, and every event is still delivered. The sends
// b made whose delivered mark died with it are sent again by a: they are
// counted and reported (the fake's Tencent dedupe window drops them, and
// the client would by event_id).
func TestTwoInstancesOneKilledStillDeliversAll(t *testing.T) {
	const events, users = 10_000, 1000
	b := newBacklog(t, events, users)
	cfg := backlogConfig()
	cfg.WalletNoticeWorker.LockTTL = 3 * time.Second // how long b's rows wait after the kill
	a := b.start(t, "notice-a", cfg, 0)
	victim := b.start(t, "notice-b", cfg, 1000)
	deadline := time.Now().Add(2 * time.Minute)
	for !victim.dead.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("b never reached its 1000th send (sent %d; a sent %d)", victim.sent.Load(), a.sent.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	killedAt := time.Now()
	took := b.waitDelivered(t, 3*time.Minute)
	victim.stop()
	dups := b.checkFake(t)
	calls := b.fake.CallCount(tencentim.APISendMsg)
	t.Logf("b killed after %d sends; all %d delivered %s after the kill (lock_ttl %s); a sent %d; duplicates (sent again after the kill, dropped by the IM dedupe): %d; sendmsg calls %d",
		victim.sent.Load(), events, time.Since(killedAt).Round(time.Millisecond), cfg.WalletNoticeWorker.LockTTL, a.sent.Load(), dups, calls)
	_ = took
	if int(a.sent.Load()+victim.sent.Load()) != events+dups || calls != events+dups {
		t.Fatalf("sends a %d + b %d, calls %d; want %d accepted + %d duplicates", a.sent.Load(), victim.sent.Load(), calls, events, dups)
	}
	if dups > cfg.WalletNoticeWorker.BatchSize {
		t.Fatalf("%d duplicates: more than one claimed batch of b was repeated", dups)
	}
}
