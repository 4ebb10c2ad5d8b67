package wallet_test

import (
	"errors"
	"math"
	"testing"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

func newService(t *testing.T, gifts []configs.GiftConfig, percent int64) *wallet.Service {
	t.Helper()
	svc, err := wallet.NewService(memdb.NewWalletStore(), gifts, configs.WalletConfig{DiamondPercent: percent})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return svc
}

// The gift catalog as a table: price × count, heat × count, and the
// receiver's DIAMOND at the percent, floored; overflow is refused.
func TestQuoteGift(t *testing.T) {
	gifts := []configs.GiftConfig{
		{ID: "rose", Price: 10, Heat: 3},
		{ID: "odd", Price: 7, Heat: 0},
		{ID: "whale", Price: math.MaxInt64 / 2, Heat: 1},
	}
	for _, tc := range []struct {
		gift    string
		count   int64
		percent int64
		want    wallet.GiftQuote
		err     error
	}{
		{"rose", 1, 100, wallet.GiftQuote{PriceTotal: 10, DiamondTotal: 10, HeatValue: 3}, nil},
		{"rose", 3, 60, wallet.GiftQuote{PriceTotal: 30, DiamondTotal: 18, HeatValue: 9}, nil},
		{"odd", 1, 50, wallet.GiftQuote{PriceTotal: 7, DiamondTotal: 3, HeatValue: 0}, nil}, // 3.5 floors to 3
		{"odd", 3, 10000, wallet.GiftQuote{PriceTotal: 21, DiamondTotal: 2100, HeatValue: 0}, nil},
		{"whale", 2, 100, wallet.GiftQuote{}, errclass.Invalid}, // price overflows only with the percent
		{"whale", 3, 100, wallet.GiftQuote{}, errclass.Invalid},
		{"rose", 0, 100, wallet.GiftQuote{}, errclass.Invalid},
		{"rose", wallet.MaxGiftCount + 1, 100, wallet.GiftQuote{}, errclass.Invalid},
		{"lily", 1, 100, wallet.GiftQuote{}, errclass.Invalid},
	} {
		q, err := newService(t, gifts, tc.percent).QuoteGift(tc.gift, tc.count)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s×%d @%d%%: got %v, want %v", tc.gift, tc.count, tc.percent, err, tc.err)
			}
			continue
		}
		if err != nil || q != tc.want {
			t.Errorf("%s×%d @%d%%: got %+v %v, want %+v", tc.gift, tc.count, tc.percent, q, err, tc.want)
		}
	}
}

func TestNewServiceRefusesBadCatalogs(t *testing.T) {
	s := memdb.NewWalletStore()
	if _, err := wallet.NewService(nil, nil, configs.WalletConfig{}); err == nil {
		t.Error("nil store accepted")
	}
	if _, err := wallet.NewService(s, []configs.GiftConfig{{ID: "a", Price: 1}, {ID: "a", Price: 2}}, configs.WalletConfig{}); err == nil {
		t.Error("duplicate gift accepted")
	}
	if _, err := wallet.NewService(s, nil, configs.WalletConfig{}, wallet.WithVipPlans([]wallet.VipPlan{{Level: 1, Name: "V", Price: 1}})); err == nil {
		t.Error("VIP plan without a duration accepted")
	}
}

func TestCreditOverflowRefused(t *testing.T) {
	svc := newService(t, nil, 100)
	ctx := t.Context()
	if _, err := svc.Credit(ctx, wallet.CreditRequest{AppCode: "a", CommandID: "c1", UserID: "u", AssetType: wallet.AssetCoin, Amount: math.MaxInt64}); err != nil {
		t.Fatalf("first credit: %v", err)
	}
	_, err := svc.Credit(ctx, wallet.CreditRequest{AppCode: "a", CommandID: "c2", UserID: "u", AssetType: wallet.AssetCoin, Amount: 1})
	if !errors.Is(err, errclass.Invalid) {
		t.Fatalf("overflowing credit: got %v, want errclass.Invalid", err)
	}
}

func TestCheckPlanRequiresOutboxRow(t *testing.T) {
	key := persistence.AccountKey{AppCode: "a", UserID: "u", AssetType: wallet.AssetCoin}
	tx := persistence.WalletTx{AppCode: "a", CommandID: "c", Lock: []persistence.AccountKey{key}}
	view := persistence.WalletView{Accounts: map[persistence.AccountKey]persistence.Account{key: {AppCode: "a", UserID: "u", AssetType: wallet.AssetCoin}}}
	acc := persistence.Account{AppCode: "a", UserID: "u", AssetType: wallet.AssetCoin, Available: 5, BalanceVersion: 1}
	plan := persistence.WalletPlan{
		Record:   persistence.WalletTxRecord{TransactionID: "t", AppCode: "a", CommandID: "c"},
		Accounts: []persistence.Account{acc},
		Ledger:   []persistence.LedgerEntry{{TransactionID: "t", AppCode: "a", UserID: "u", AssetType: wallet.AssetCoin, AvailableDelta: 5, AvailableAfter: 5, BalanceVersion: 1}},
	}
	if err := persistence.CheckWalletPlan(tx, view, plan); err == nil {
		t.Fatal("a balance change without its WalletBalanceChanged row passed")
	}
	plan.Outbox = []persistence.WalletOutboxEvent{{EventID: persistence.BalanceEventID("t", "u", wallet.AssetCoin)}}
	if err := persistence.CheckWalletPlan(tx, view, plan); err != nil {
		t.Fatalf("a consistent plan failed: %v", err)
	}
	plan.Ledger[0].AvailableDelta = 4
	if err := persistence.CheckWalletPlan(tx, view, plan); err == nil {
		t.Fatal("a ledger delta that does not match the balance passed")
	}
}

func TestEventIDsFollowSeed(t *testing.T) {
	if got := persistence.BalanceEventID("tx_xxx", "10001", "COIN"); got != "tx_xxx:WalletBalanceChanged:10001:COIN" {
		t.Fatalf("BalanceEventID = %q", got)
	}
}
