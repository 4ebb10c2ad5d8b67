package giftsettle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// balance is a user's COIN (available, frozen) and DIAMOND available.
func (f *fixture) balance(t *testing.T, user string) (coin, frozen, diamond int64) {
	t.Helper()
	b, err := f.svc.GetBalances(t.Context(), "app", user)
	if err != nil {
		t.Fatal(err)
	}
	return b.Accounts[0].Available, b.Accounts[0].Frozen, b.Accounts[1].Available
}

// A gift whose confirm would fail is refused before anything is held.
func TestHoldRefusedUpFrontWhenTheConfirmWouldOverflow(t *testing.T) {
	f := newFixture(t)
	if _, err := f.svc.Credit(t.Context(), wallet.CreditRequest{AppCode: "app", CommandID: "whale", UserID: "b",
		AssetType: wallet.AssetDiamond, Amount: math.MaxInt64 - 2}); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.HoldGift(t.Context(), wallet.DebitGiftRequest{AppCode: "app", CommandID: "g", RoomID: "r1",
		FromUserID: "a", ToUserID: "b", GiftID: "rose", Count: 1})
	if !errors.Is(err, errclass.Invalid) {
		t.Fatalf("hold to a receiver whose DIAMOND would overflow: %v, want ErrInvalid", err)
	}
	if _, err := f.store.GiftHold(t.Context(), "app", "g"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a refused hold left a reservation: %v", err)
	}
	if coin, frozen, _ := f.balance(t, "a"); coin != 1000 || frozen != 0 {
		t.Fatalf("sender after a refused hold: %d available, %d frozen; want 1000, 0", coin, frozen)
	}
}

// 100 gifts whose confirm fails (the receiver's DIAMOND filled up after
// the hold, which no up-front check can see) plus 1,000 normal ones, the
// bad ones oldest so they sit at the head of the queue. Every normal
// hold settles within the bound a clean queue would take; the bad ones
// back off, park after ParkAfter failures, never block, and are counted;
// an operator refund ends them; money is conserved throughout.
func TestStuckHoldsNeverBlockTheQueue(t *testing.T) {
	f := newFixture(t)
	const bad, normal, price, diamond = 100, 1000, 10, 5 // rose: 10 COIN, 50% DIAMOND
	if _, err := f.svc.Credit(t.Context(), wallet.CreditRequest{AppCode: "app", CommandID: "c2", UserID: "a", AssetType: wallet.AssetCoin, Amount: 20_000}); err != nil {
		t.Fatal(err)
	}
	const coinTotal = 21_000
	seq := int64(0)
	hold := func(id, to string, logged bool) {
		t.Helper()
		if _, err := f.svc.HoldGift(t.Context(), wallet.DebitGiftRequest{AppCode: "app", CommandID: id, RoomID: "r1",
			FromUserID: "a", ToUserID: to, GiftID: "rose", Count: 1}); err != nil {
			t.Fatal(err)
		}
		if logged {
			seq++
			f.logGift(t, id, seq)
		}
	}
	for i := range bad {
		hold(fmt.Sprint("bad-", i), "whale", true)
	}
	// Filled after the holds: every one of their confirms now overflows.
	if _, err := f.svc.Credit(t.Context(), wallet.CreditRequest{AppCode: "app", CommandID: "whale", UserID: "whale",
		AssetType: wallet.AssetDiamond, Amount: math.MaxInt64 - 1}); err != nil {
		t.Fatal(err)
	}
	f.clk.now = f.clk.now.Add(time.Millisecond)
	for i := range normal {
		hold(fmt.Sprint("ok-", i), "b", i%2 == 0) // half logged (confirm), half lost (refund)
	}
	f.deps.Config.ParkAfter, f.deps.Config.MaxBackoff = 4, 4*time.Second
	f.deps.Stuck = NewStuck()
	f.clk.now = f.clk.now.Add(f.deps.Config.SettleAfter + time.Second)

	conserved := func(when string) {
		t.Helper()
		coin, frozen, _ := f.balance(t, "a")
		_, _, got := f.balance(t, "b")
		confirmed := int64(got / diamond)
		if coin+frozen+confirmed*price != coinTotal {
			t.Fatalf("%s: sender %d + frozen %d + spent %d×%d != %d", when, coin, frozen, confirmed, price, coinTotal)
		}
	}
	settledOK := func() int {
		n := 0
		for i := range normal {
			if f.state(t, fmt.Sprint("ok-", i)) != persistence.HoldOpen {
				n++
			}
		}
		return n
	}
	// A clean queue of 1,000 at 100 per pass takes 10 passes; the bad
	// ones may cost the first pass its slots (they were new then), not
	// more: their retries wait behind every hold that never failed.
	bound := normal/f.deps.Config.BatchSize + 1
	passes := 0
	for settledOK() < normal {
		passes++
		if passes > bound {
			t.Fatalf("after %d passes only %d of %d normal holds settled: the stuck ones block the queue", bound, settledOK(), normal)
		}
		if _, err := RunOnce(t.Context(), f.deps); err != nil && !errors.Is(err, errclass.Invalid) {
			t.Fatalf("pass %d: %v", passes, err)
		}
		conserved(fmt.Sprint("pass ", passes))
		f.clk.now = f.clk.now.Add(f.deps.Config.PollInterval)
	}
	// The bad ones back off, then park; the passes in between stay cheap.
	for range 30 {
		if _, err := RunOnce(t.Context(), f.deps); err != nil && !errors.Is(err, errclass.Invalid) {
			t.Fatal(err)
		}
		f.clk.now = f.clk.now.Add(f.deps.Config.PollInterval)
	}
	if got := value(f.m.Parked); got != bad {
		t.Fatalf("parked gauge %v, want %d", got, bad)
	}
	if got := value(f.m.Failures); got != bad*float64(f.deps.Config.ParkAfter) {
		t.Fatalf("failures %v, want %d tries of each bad hold and no more", got, bad*f.deps.Config.ParkAfter)
	}
	res, err := RunOnce(t.Context(), f.deps)
	if err != nil || res.Failed != 0 || res.Skipped != 0 {
		t.Fatalf("a pass over parked holds: %+v, %v; want none tried: the store's scan leaves them out", res, err)
	}
	if n, _ := f.deps.Stuck.size(); n != 0 {
		t.Fatalf("the node still remembers %d holds: parked ones belong to the store", n)
	}
	if st, err := f.store.GiftHoldStats(t.Context()); err != nil || st.Parked != bad {
		t.Fatalf("store stats %+v, %v; want %d parked", st, err, bad)
	}
	for i := range bad {
		if s := f.state(t, fmt.Sprint("bad-", i)); s != persistence.HoldOpen {
			t.Fatalf("bad-%d is %s: parked holds stay open for the operator", i, s)
		}
	}
	conserved("parked")
	// The operator refunds them (roomctl wallet hold refund): the sender's
	// COIN comes back, and the node forgets them.
	for i := range bad {
		if _, err := f.svc.RefundGift(t.Context(), "app", fmt.Sprint("bad-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := RunOnce(t.Context(), f.deps); err != nil {
		t.Fatal(err)
	}
	if got := value(f.m.Parked); got != 0 {
		t.Fatalf("parked gauge %v after the operator resolved them all", got)
	}
	if _, frozen, _ := f.balance(t, "a"); frozen != 0 {
		t.Fatalf("%d COIN still frozen after every hold ended", frozen)
	}
	conserved("resolved")
}

// Backoff doubles per failure up to the cap; parking happens once.
func TestStuckBackoffAndPark(t *testing.T) {
	s := NewStuck()
	id, now := holdID{"app", "g"}, time.Unix(0, 0)
	var waits []time.Duration
	for i := 1; i <= 5; i++ {
		fails, parked := s.failed(id, now, time.Second, 5*time.Second, 5, "boom")
		if fails != i || parked != (i == 5) {
			t.Fatalf("failure %d: fails %d parked %v", i, fails, parked)
		}
		waits = append(waits, s.m[id].next.Sub(now))
	}
	if fmt.Sprint(waits) != "[1s 2s 4s 5s 5s]" {
		t.Fatalf("backoff %v", waits)
	}
	skipped := 0
	got, repark := s.order([]persistence.GiftHold{{AppCode: "app", CommandID: "g"}}, now.Add(time.Hour), 10, &skipped)
	if len(got) != 0 || skipped != 1 || len(repark) != 1 {
		t.Fatalf("a hold parked here but not in the store: offered %d, skipped %d, to park again %d; want 0, 1, 1", len(got), skipped, len(repark))
	}
	if _, parked := s.failed(id, now, time.Second, 5*time.Second, 5, "boom"); parked {
		t.Fatal("parked twice")
	}
	s.keepOnly(map[holdID]bool{})
	if n, _ := s.size(); n != 0 {
		t.Fatal("keepOnly kept a hold no longer open")
	}
}

// failingWallet is a wallet whose confirm and refund fail for the gifts
// in bad (a row the store cannot write), and whose park can be cut.
type failingWallet struct {
	*wallet.Service
	bad      map[string]bool
	parkDown bool
	tries    map[string]int
}

func (w *failingWallet) ConfirmGift(ctx context.Context, app, id string) (wallet.SettleResult, error) {
	w.tries[id]++
	if w.bad[id] {
		return wallet.SettleResult{}, errors.New("row cannot be written")
	}
	return w.Service.ConfirmGift(ctx, app, id)
}

func (w *failingWallet) RefundGift(ctx context.Context, app, id string) (wallet.SettleResult, error) {
	w.tries[id]++
	if w.bad[id] {
		return wallet.SettleResult{}, errors.New("row cannot be written")
	}
	return w.Service.RefundGift(ctx, app, id)
}

func (w *failingWallet) ParkGift(ctx context.Context, app, id, reason string) (bool, error) {
	if w.parkDown {
		return false, fmt.Errorf("wallet store: %w", persistence.ErrUnavailable)
	}
	return w.Service.ParkGift(ctx, app, id, reason)
}

// A parked hold stays parked across a restart (a new Stuck, as a new
// process has): no pass tries it again, on this node or another, while
// the normal holds beside it settle; a park the store could not record
// is retried until it is; the operator's refund ends it once, a second
// refund is the same answer and a confirm is refused; money is conserved.
func TestParkedHoldStaysParkedAcrossARestart(t *testing.T) {
	f := newFixture(t)
	w := &failingWallet{Service: f.svc, bad: map[string]bool{"stuck": true}, tries: map[string]int{}}
	f.deps.Wallet, f.deps.Config.ParkAfter, f.deps.Config.MaxBackoff, f.deps.Stuck = w, 3, time.Second, NewStuck()
	f.hold(t, "stuck")
	f.logGift(t, "stuck", 1)
	f.clk.now = f.clk.now.Add(f.deps.Config.SettleAfter + time.Second)
	total := func(when string) {
		t.Helper()
		coin, frozen, _ := f.balance(t, "a")
		_, _, diamond := f.balance(t, "b")
		if coin+frozen+diamond*2 != 1000 { // rose: 10 COIN, 5 DIAMOND
			t.Fatalf("%s: available %d + frozen %d + spent %d != 1000", when, coin, frozen, diamond*2)
		}
	}
	// The store is down for the park: the hold stays parked on this
	// node, and the park is retried.
	w.parkDown = true
	for range 10 {
		if _, err := RunOnce(t.Context(), f.deps); err == nil {
			t.Fatal("a pass with a failing settlement reported no error")
		}
		f.clk.now = f.clk.now.Add(2 * time.Second)
	}
	if w.tries["stuck"] != 3 {
		t.Fatalf("tried %d times, want ParkAfter=3 and no more while parked here", w.tries["stuck"])
	}
	if h, _ := f.store.GiftHold(t.Context(), "app", "stuck"); h.ParkedAtMs != 0 {
		t.Fatal("parked in the store while the park call failed")
	}
	w.parkDown = false
	if _, err := RunOnce(t.Context(), f.deps); err != nil {
		t.Fatalf("pass that records the park: %v", err)
	}
	h, err := f.store.GiftHold(t.Context(), "app", "stuck")
	if err != nil || h.ParkedAtMs == 0 || h.State != persistence.HoldOpen || !strings.Contains(h.ParkReason, "row cannot be written") {
		t.Fatalf("after the park was recorded: %+v, %v", h, err)
	}
	if value(f.m.Parked) != 1 {
		t.Fatalf("parked gauge %v, want 1", value(f.m.Parked))
	}
	// Restart: a new process has a new Stuck. Normal holds made since
	// settle; the parked one is never tried again.
	for i := range 5 {
		f.hold(t, fmt.Sprint("normal-", i))
	}
	f.clk.now = f.clk.now.Add(f.deps.Config.SettleAfter + time.Second)
	for node := range 2 {
		d := f.deps
		d.Stuck = NewStuck()
		res, err := RunOnce(t.Context(), d)
		if err != nil || w.tries["stuck"] != 3 {
			t.Fatalf("node %d after a restart: %+v, %v, tries %d; want the parked hold left alone", node, res, err, w.tries["stuck"])
		}
		if node == 0 && res.Refunded != 5 {
			t.Fatalf("normal holds after a restart: %+v, want 5 refunded", res)
		}
		if value(f.m.Parked) != 1 {
			t.Fatalf("parked gauge %v after a restart, want 1", value(f.m.Parked))
		}
	}
	total("parked across a restart")
	// The operator resolves it (the store no longer fails for it).
	w.bad = nil
	first, err := f.svc.RefundGift(t.Context(), "app", "stuck")
	if err != nil || first.State != persistence.HoldRefunded {
		t.Fatalf("operator refund: %+v, %v", first, err)
	}
	again, err := f.svc.RefundGift(t.Context(), "app", "stuck")
	if err != nil || again != first {
		t.Fatalf("refund again: %+v, %v; want the first answer %+v", again, err, first)
	}
	if _, err := f.svc.ConfirmGift(t.Context(), "app", "stuck"); !errors.Is(err, wallet.ErrGiftSettled) {
		t.Fatalf("confirm after the refund: %v, want ErrGiftSettled", err)
	}
	if coin, frozen, _ := f.balance(t, "a"); coin != 1000 || frozen != 0 {
		t.Fatalf("sender after everything was refunded: %d available, %d frozen", coin, frozen)
	}
	if _, err := RunOnce(t.Context(), f.deps); err != nil || value(f.m.Parked) != 0 {
		t.Fatalf("after the resolve: %v, parked gauge %v", err, value(f.m.Parked))
	}
	if parked, err := f.svc.ParkGift(t.Context(), "app", "stuck", "late"); err != nil || parked {
		t.Fatalf("parking a settled reservation: %v, %v; want false, nil", parked, err)
	}
	total("resolved")
}
