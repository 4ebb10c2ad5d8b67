package wallet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// walletStores opens each wallet backend: go-memdb, and MariaDB in a
// database of the test's own.
func walletStores() map[string]func(t *testing.T) persistence.WalletStore {
	return map[string]func(t *testing.T) persistence.WalletStore{
		"memdb": func(*testing.T) persistence.WalletStore { return memdb.NewWalletStore() },
		"mariadb": func(t *testing.T) persistence.WalletStore {
			cfg, _ := mysqltest.NewDatabase(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := mysql.OpenWalletStore(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

const app = "app"

var holdGifts = []configs.GiftConfig{{ID: "rose", Price: 10, Heat: 3}, {ID: "free", Price: 0, Heat: 1}}

func holdService(t *testing.T, store persistence.WalletStore) *wallet.Service {
	t.Helper()
	svc, err := wallet.NewService(store, holdGifts, configs.WalletConfig{DiamondPercent: 60})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func gift(id, from, to string, count int64) wallet.DebitGiftRequest {
	return wallet.DebitGiftRequest{AppCode: app, CommandID: id, RoomID: "r1", FromUserID: from, ToUserID: to, GiftID: "rose", Count: count}
}

func credit(t *testing.T, svc *wallet.Service, user string, amount int64) {
	t.Helper()
	if _, err := svc.Credit(t.Context(), wallet.CreditRequest{AppCode: app, CommandID: "credit-" + user, UserID: user, AssetType: wallet.AssetCoin, Amount: amount}); err != nil {
		t.Fatal(err)
	}
}

type bal struct{ coin, frozen, diamond int64 }

func balanceOf(t *testing.T, svc *wallet.Service, user string) bal {
	t.Helper()
	b, err := svc.GetBalances(t.Context(), app, user)
	if err != nil {
		t.Fatal(err)
	}
	return bal{coin: b.Accounts[0].Available, frozen: b.Accounts[0].Frozen, diamond: b.Accounts[1].Available}
}

func wantBal(t *testing.T, svc *wallet.Service, user string, want bal) {
	t.Helper()
	if got := balanceOf(t, svc, user); got != want {
		t.Fatalf("%s: got %+v, want %+v", user, got, want)
	}
}

func holdState(t *testing.T, store persistence.WalletStore, id string) string {
	t.Helper()
	h, err := store.GiftHold(t.Context(), app, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return h.State
}

// ledgerAndOutboxAgree checks the user's COIN and DIAMOND ledgers against
// the balances, and that every ledger entry has its WalletBalanceChanged
// with the same deltas and balance_version.
func ledgerAndOutboxAgree(t *testing.T, store persistence.WalletStore, svc *wallet.Service, users ...string) {
	t.Helper()
	events := map[string]wallet.BalanceChanged{}
	recs, err := store.ListOutboxAfter(t.Context(), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var ev wallet.BalanceChanged
		if r.EventType == persistence.EventBalanceChanged {
			if err := json.Unmarshal(r.Payload, &ev); err != nil {
				t.Fatal(err)
			}
			events[ev.EventID] = ev
		}
	}
	for _, u := range users {
		b := balanceOf(t, svc, u)
		for asset, want := range map[string][2]int64{wallet.AssetCoin: {b.coin, b.frozen}, wallet.AssetDiamond: {b.diamond, 0}} {
			entries, err := store.Ledger(t.Context(), persistence.AccountKey{AppCode: app, UserID: u, AssetType: asset})
			if err != nil {
				t.Fatal(err)
			}
			var avail, frozen int64
			for i, e := range entries {
				avail, frozen = avail+e.AvailableDelta, frozen+e.FrozenDelta
				if e.BalanceVersion != int64(i+1) || e.AvailableAfter != avail || e.FrozenAfter != frozen {
					t.Fatalf("%s %s ledger entry %d: %+v, running %d/%d", u, asset, i, e, avail, frozen)
				}
				ev, ok := events[persistence.BalanceEventID(e.TransactionID, u, asset)]
				if !ok || ev.AvailableDelta != e.AvailableDelta || ev.FrozenDelta != e.FrozenDelta || ev.BalanceVersion != e.BalanceVersion {
					t.Fatalf("%s %s ledger entry %+v has no matching WalletBalanceChanged (got %+v, %v)", u, asset, e, ev, ok)
				}
			}
			if avail != want[0] || frozen != want[1] {
				t.Fatalf("%s %s: ledger sums to %d/%d, balance is %d/%d", u, asset, avail, frozen, want[0], want[1])
			}
		}
	}
}

func TestGiftHoldConfirmRefund(t *testing.T) {
	for name, open := range walletStores() {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			svc := holdService(t, store)
			ctx := t.Context()
			credit(t, svc, "a", 100)

			// Reserve: the sender's COIN moves to frozen, the receiver gets
			// nothing yet; the same request again reserves nothing more.
			res, err := svc.HoldGift(ctx, gift("g1", "a", "b", 3))
			if err != nil || res.PriceTotal != 30 || res.HeatValue != 9 || res.Duplicate {
				t.Fatalf("HoldGift: %+v, %v", res, err)
			}
			wantBal(t, svc, "a", bal{coin: 70, frozen: 30})
			wantBal(t, svc, "b", bal{})
			again, err := svc.HoldGift(ctx, gift("g1", "a", "b", 3))
			if err != nil || !again.Duplicate || again.TransactionID != res.TransactionID {
				t.Fatalf("HoldGift again: %+v, %v; want the recorded reservation", again, err)
			}
			wantBal(t, svc, "a", bal{coin: 70, frozen: 30})
			if _, err := svc.HoldGift(ctx, gift("g1", "a", "b", 4)); !errors.Is(err, wallet.ErrCommandReused) {
				t.Fatalf("HoldGift with the id of another gift: %v, want ErrCommandReused", err)
			}
			if st, err := svc.GiftHoldStats(ctx); err != nil || st.Open != 1 {
				t.Fatalf("stats with one open hold: %+v, %v", st, err)
			}

			// Confirm: frozen spent, receiver credited 60%, once.
			for range 2 {
				if _, err := svc.ConfirmGift(ctx, app, "g1"); err != nil {
					t.Fatalf("ConfirmGift: %v", err)
				}
			}
			wantBal(t, svc, "a", bal{coin: 70})
			wantBal(t, svc, "b", bal{diamond: 18})
			if _, err := svc.RefundGift(ctx, app, "g1"); !errors.Is(err, errclass.Precondition) {
				t.Fatalf("RefundGift of a confirmed gift: %v, want errclass.Precondition", err)
			}
			if s := holdState(t, store, "g1"); s != persistence.HoldConfirmed {
				t.Fatalf("hold g1: %s", s)
			}

			// Refund: frozen back to available, with a ledger entry and an
			// event; the id then answers ErrGiftRefunded, never delivers.
			if _, err := svc.HoldGift(ctx, gift("g2", "a", "b", 2)); err != nil {
				t.Fatal(err)
			}
			wantBal(t, svc, "a", bal{coin: 50, frozen: 20})
			for range 2 {
				if _, err := svc.RefundGift(ctx, app, "g2"); err != nil {
					t.Fatalf("RefundGift: %v", err)
				}
			}
			wantBal(t, svc, "a", bal{coin: 70})
			wantBal(t, svc, "b", bal{diamond: 18})
			if _, err := svc.ConfirmGift(ctx, app, "g2"); !errors.Is(err, errclass.Precondition) {
				t.Fatalf("ConfirmGift of a refunded gift: %v, want errclass.Precondition", err)
			}
			if _, err := svc.HoldGift(ctx, gift("g2", "a", "b", 2)); !errors.Is(err, wallet.ErrGiftRefunded) {
				t.Fatalf("HoldGift of a refunded gift: %v, want ErrGiftRefunded", err)
			}
			wantBal(t, svc, "a", bal{coin: 70})

			// Insufficient: nothing reserved, nothing recorded.
			if _, err := svc.HoldGift(ctx, gift("g3", "a", "b", 8)); !errors.Is(err, wallet.ErrInsufficientBalance) {
				t.Fatalf("HoldGift over the balance: %v", err)
			}
			if s := holdState(t, store, "g3"); s != "" {
				t.Fatalf("refused gift left a hold in state %s", s)
			}
			// A refund of a gift never reserved has nothing to do.
			if _, err := svc.RefundGift(ctx, app, "g-none"); err != nil {
				t.Fatalf("RefundGift without a reservation: %v", err)
			}
			if st, err := svc.GiftHoldStats(ctx); err != nil || st.Open != 0 {
				t.Fatalf("stats with none open: %+v, %v", st, err)
			}
			ledgerAndOutboxAgree(t, store, svc, "a", "b")
		})
	}
}

// Confirms and refunds of the same gifts race from many goroutines (two
// nodes and the reconciler): each gift ends with exactly one settlement,
// and money is conserved: COIN available + frozen of everyone plus
// confirmed prices equals the credits, DIAMOND equals the confirmed
// shares.
func TestGiftSettleRaceOneOutcomeMoneyConserved(t *testing.T) {
	for name, open := range walletStores() {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			svc := holdService(t, store)
			ctx := t.Context()
			const gifts, racers = 20, 6
			credit(t, svc, "a", 10000)
			for i := range gifts {
				if _, err := svc.HoldGift(ctx, gift(fmt.Sprintf("g%d", i), "a", "b", 1)); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			for r := range racers {
				wg.Go(func() {
					for i := range gifts {
						id := fmt.Sprintf("g%d", i)
						var err error
						if (r+i)%2 == 0 {
							_, err = svc.ConfirmGift(ctx, app, id)
						} else {
							_, err = svc.RefundGift(ctx, app, id)
						}
						if err != nil && !errors.Is(err, errclass.Precondition) {
							t.Errorf("settle %s: %v", id, err)
						}
					}
				})
			}
			wg.Wait()
			var confirmed int64
			for i := range gifts {
				switch s := holdState(t, store, fmt.Sprintf("g%d", i)); s {
				case persistence.HoldConfirmed:
					confirmed++
				case persistence.HoldRefunded:
				default:
					t.Fatalf("g%d ended %q", i, s)
				}
			}
			a, b := balanceOf(t, svc, "a"), balanceOf(t, svc, "b")
			if a.coin+a.frozen+b.coin+confirmed*10 != 10000 || a.frozen != 0 || b.diamond != confirmed*6 {
				t.Fatalf("money not conserved: a %+v b %+v, %d confirmed of %d", a, b, confirmed, gifts)
			}
			ledgerAndOutboxAgree(t, store, svc, "a", "b")
		})
	}
}
