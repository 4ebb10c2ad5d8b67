package giftsettle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyapp/roomcell/actors/supervise/supervisetest"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

type fixture struct {
	svc   *wallet.Service
	store *memdb.WalletStore
	rooms *memdb.Store
	clk   *clock
	deps  Deps
	m     *Metrics
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clk := &clock{now: time.UnixMilli(1_000_000)}
	store := memdb.NewWalletStore()
	svc, err := wallet.NewService(store, []configs.GiftConfig{{ID: "rose", Price: 10, Heat: 1}}, configs.WalletConfig{DiamondPercent: 50},
		wallet.WithClock(func() int64 { return clk.now.UnixMilli() }))
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{svc: svc, store: store, rooms: memdb.New(), clk: clk, m: m}
	f.deps = Deps{Wallet: svc, Rooms: f.rooms, Config: configs.WithDefaults(configs.GiftReconcilerConfig{SettleAfter: 30 * time.Second, PollInterval: time.Second, BatchSize: 100}),
		Timeout: time.Second, Clock: clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: m}
	if _, err := svc.Credit(t.Context(), wallet.CreditRequest{AppCode: "app", CommandID: "c", UserID: "a", AssetType: wallet.AssetCoin, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) hold(t *testing.T, id string) {
	t.Helper()
	if _, err := f.svc.HoldGift(t.Context(), wallet.DebitGiftRequest{AppCode: "app", CommandID: id, RoomID: "r1", FromUserID: "a", ToUserID: "b", GiftID: "rose", Count: 1}); err != nil {
		t.Fatal(err)
	}
}

// logGift appends the gift to the room as the grain would.
func (f *fixture) logGift(t *testing.T, id string, seq int64) {
	t.Helper()
	err := f.rooms.Append(t.Context(), persistence.Append{Gift: true, Command: persistence.CommandRecord{
		AppCode: "app", RoomID: "r1", Seq: seq, CommandID: id, CommandType: "SendGift"}})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) state(t *testing.T, id string) string {
	t.Helper()
	h, err := f.store.GiftHold(t.Context(), "app", id)
	if err != nil {
		t.Fatal(err)
	}
	return h.State
}

// Old open reservations are settled by the room's answer: logged ones are
// confirmed, the others voided (so they can never be logged) and refunded;
// young ones are left to the grain. The gauges show what stays open.
func TestRunOnceSettlesByTheRoomOutcome(t *testing.T) {
	f := newFixture(t)
	f.hold(t, "logged")
	f.logGift(t, "logged", 1)
	f.hold(t, "lost")
	f.clk.now = f.clk.now.Add(40 * time.Second)
	f.hold(t, "young")

	res, err := RunOnce(t.Context(), f.deps)
	if err != nil || res != (Result{Confirmed: 1, Refunded: 1}) {
		t.Fatalf("RunOnce: %+v, %v; want one confirmed and one refunded", res, err)
	}
	for id, want := range map[string]string{"logged": persistence.HoldConfirmed, "lost": persistence.HoldRefunded, "young": persistence.HoldOpen} {
		if got := f.state(t, id); got != want {
			t.Fatalf("%s: %s, want %s", id, got, want)
		}
	}
	// The void holds: the lost gift can no longer be appended.
	err = f.rooms.Append(t.Context(), persistence.Append{Gift: true, Command: persistence.CommandRecord{AppCode: "app", RoomID: "r1", Seq: 2, CommandID: "lost", CommandType: "SendGift"}})
	if !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("late append of a refunded gift: %v, want ErrConflict", err)
	}
	b, _ := f.svc.GetBalances(t.Context(), "app", "a")
	r, _ := f.svc.GetBalances(t.Context(), "app", "b")
	if b.Accounts[0].Available != 980 || b.Accounts[0].Frozen != 10 || r.Accounts[1].Available != 5 {
		t.Fatalf("balances: sender %+v receiver %+v", b.Accounts[0], r.Accounts[1])
	}
	if got := value(f.m.Open); got != 1 {
		t.Fatalf("open gauge %v, want 1", got)
	}
	if got := value(f.m.OldestAge); got != 0 {
		t.Fatalf("oldest age gauge %v, want 0 (the young hold was made now)", got)
	}
	if value(f.m.Refunds) != 1 || value(f.m.Confirms) != 1 {
		t.Fatal("refund and confirm counters")
	}
	// Nothing old is left: a second pass does nothing.
	if res, err := RunOnce(t.Context(), f.deps); err != nil || res != (Result{}) {
		t.Fatalf("second pass: %+v, %v", res, err)
	}
}

type downRooms struct{}

func (downRooms) VoidGift(context.Context, persistence.RoomKey, string, int64) (bool, error) {
	return false, fmt.Errorf("room db: %w", persistence.ErrUnavailable)
}

// With the room store down nothing can be decided: the reservation stays
// open (never refunded on a guess) and the pass reports the failure.
func TestRunOnceLeavesReservationsOpenWhenTheRoomStoreIsDown(t *testing.T) {
	f := newFixture(t)
	f.hold(t, "g")
	f.clk.now = f.clk.now.Add(time.Minute)
	f.deps.Rooms = downRooms{}
	res, err := RunOnce(t.Context(), f.deps)
	if err == nil || res.Failed != 1 || res.Refunded+res.Confirmed != 0 {
		t.Fatalf("RunOnce with the room store down: %+v, %v", res, err)
	}
	if s := f.state(t, "g"); s != persistence.HoldOpen {
		t.Fatalf("hold after a failed pass: %s", s)
	}
	if got := value(f.m.OldestAge); got != time.Minute.Seconds() {
		t.Fatalf("oldest age %v, want %v", got, time.Minute.Seconds())
	}
}

// The actor runs passes by itself: a reservation that ages past the bound
// is settled without anyone asking.
func TestWorkerSettlesOnItsOwn(t *testing.T) {
	f := newFixture(t)
	f.deps.Config.SettleAfter, f.deps.Config.PollInterval, f.deps.Clock = 50*time.Millisecond, 20*time.Millisecond, time.Now
	f.hold(t, "g") // made at the fixture's old fake time, so already old
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	sup, _ := supervisetest.NewSupervisor(t, sys)
	w, err := Start(sup, f.deps)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.state(t, "g") != persistence.HoldRefunded {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not settle the old reservation within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := w.Stop(5 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := Start(sup, Deps{}); err == nil {
		t.Fatal("Start without deps: got nil error")
	}
}

// A panicking pass is restarted by the shared shell like every worker's:
// counted, listed down while it waits, then running and settling again.
func TestWorkerRecoversFromPanics(t *testing.T) {
	f := newFixture(t)
	f.deps.Config.SettleAfter, f.deps.Config.PollInterval, f.deps.Clock = 50*time.Millisecond, 20*time.Millisecond, time.Now
	left := &atomic.Int32{}
	left.Store(2)
	f.deps.Rooms = panicRooms{Rooms: f.deps.Rooms, left: left}
	f.hold(t, "g")
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	sup, reg := supervisetest.NewSupervisor(t, sys)
	stopWatch := supervisetest.WatchDown(sup.Health(), WorkerName)
	w, err := Start(sup, f.deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(5 * time.Second) })
	deadline := time.Now().Add(5 * time.Second)
	for f.state(t, "g") != persistence.HoldRefunded {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not settle after its restarts")
		}
		time.Sleep(10 * time.Millisecond)
	}
	supervisetest.CheckRecovered(t, sup, reg, w, WorkerName, 2, stopWatch())
}

// panicRooms panics in VoidGift while left is above zero: a bug in a pass.
type panicRooms struct {
	Rooms
	left *atomic.Int32
}

func (p panicRooms) VoidGift(ctx context.Context, key persistence.RoomKey, commandID string, nowMs int64) (bool, error) {
	if p.left.Add(-1) >= 0 {
		panic("void bug")
	}
	return p.Rooms.VoidGift(ctx, key, commandID, nowMs)
}

// value reads a gauge or counter.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// The reconciler takes wallet.gift_reconciler as given: a field left
// unset in a section built in code is refused, naming its key, rather
// than run as zero or quietly defaulted a second time (park_after and
// max_backoff once were).
func TestUnsetConfigIsRefused(t *testing.T) {
	f := newFixture(t)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	sup, _ := supervisetest.NewSupervisor(t, sys)
	for _, tc := range []struct {
		key   string
		unset func(*configs.GiftReconcilerConfig)
	}{
		{"wallet.gift_reconciler.settle_after", func(c *configs.GiftReconcilerConfig) { c.SettleAfter = 0 }},
		{"wallet.gift_reconciler.poll_interval", func(c *configs.GiftReconcilerConfig) { c.PollInterval = 0 }},
		{"wallet.gift_reconciler.batch_size", func(c *configs.GiftReconcilerConfig) { c.BatchSize = 0 }},
		{"wallet.gift_reconciler.park_after", func(c *configs.GiftReconcilerConfig) { c.ParkAfter = 0 }},
		{"wallet.gift_reconciler.max_backoff", func(c *configs.GiftReconcilerConfig) { c.MaxBackoff = 0 }},
	} {
		d := f.deps
		tc.unset(&d.Config)
		var ce *configs.Error
		if _, err := Start(sup, d); !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("Start: %v, want a config error on %s", err, tc.key)
		}
		if _, err := RunOnce(t.Context(), d); !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("RunOnce: %v, want a config error on %s", err, tc.key)
		}
	}
	d := f.deps
	d.Timeout = 0
	if _, err := RunOnce(t.Context(), d); err == nil || !strings.Contains(err.Error(), "room.store_timeout") {
		t.Errorf("RunOnce without a timeout: %v, want an error naming room.store_timeout", err)
	}
}
