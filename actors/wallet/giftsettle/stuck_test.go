package giftsettle

import (
	"errors"
	"fmt"
	"math"
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
	f.deps.ParkAfter, f.deps.MaxBackoff = 4, 4*time.Second
	f.deps.Stuck = NewStuck()
	f.clk.now = f.clk.now.Add(f.deps.After + time.Second)

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
	bound := normal/f.deps.BatchSize + 1
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
		f.clk.now = f.clk.now.Add(f.deps.Interval)
	}
	// The bad ones back off, then park; the passes in between stay cheap.
	for range 30 {
		if _, err := RunOnce(t.Context(), f.deps); err != nil && !errors.Is(err, errclass.Invalid) {
			t.Fatal(err)
		}
		f.clk.now = f.clk.now.Add(f.deps.Interval)
	}
	if got := value(f.m.Parked); got != bad {
		t.Fatalf("parked gauge %v, want %d", got, bad)
	}
	if got := value(f.m.Failures); got != bad*float64(f.deps.ParkAfter) {
		t.Fatalf("failures %v, want %d tries of each bad hold and no more", got, bad*f.deps.ParkAfter)
	}
	res, err := RunOnce(t.Context(), f.deps)
	if err != nil || res.Skipped != bad || res.Failed != 0 {
		t.Fatalf("a pass over parked holds: %+v, %v; want them all skipped, none tried", res, err)
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
		fails, parked := s.failed(id, now, time.Second, 5*time.Second, 5)
		if fails != i || parked != (i == 5) {
			t.Fatalf("failure %d: fails %d parked %v", i, fails, parked)
		}
		waits = append(waits, s.m[id].next.Sub(now))
	}
	if fmt.Sprint(waits) != "[1s 2s 4s 5s 5s]" {
		t.Fatalf("backoff %v", waits)
	}
	skipped := 0
	if got := s.order([]persistence.GiftHold{{AppCode: "app", CommandID: "g"}}, now.Add(time.Hour), 10, &skipped); len(got) != 0 || skipped != 1 {
		t.Fatal("a parked hold was offered again")
	}
	if _, parked := s.failed(id, now, time.Second, 5*time.Second, 5); parked {
		t.Fatal("parked twice")
	}
	s.keepOnly(map[holdID]bool{})
	if n, _ := s.size(); n != 0 {
		t.Fatal("keepOnly kept a hold no longer open")
	}
}
