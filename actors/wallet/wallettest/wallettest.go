// Package wallettest is the wallet's contract suite over a
// persistence.WalletStore: every wallet backend (persistence/memdb,
// persistence/mysql) runs RunStore from its own tests. It lives beside the
// wallet rather than in persistence/storetest because it drives the store
// through wallet.Service (the results callers see), and storage packages
// must not import actors; only backend test files import it.
package wallettest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// RunStore runs the persistence.WalletStore contract, driving the store
// through wallet.Service so the suite checks what callers rely on:
// balances, the ledger, wallet_outbox payloads (seed 003's exact fields),
// idempotency by command_id and no overdraft under concurrency. newStore
// must return an empty store per call and arrange Close and teardown with
// t.Cleanup.
func RunStore(t *testing.T, newStore func(t *testing.T) persistence.WalletStore) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s persistence.WalletStore)
	}{
		{"CreditWritesLedgerAndOutbox", testWalletCredit},
		{"GiftMovesCoinToDiamond", testWalletGift},
		{"InsufficientBalanceWritesNothing", testWalletInsufficient},
		{"InvalidGiftWritesNothing", testWalletInvalidGift},
		{"RepeatCommandIDReturnsFirstResult", testWalletRepeat},
		{"ReusedCommandIDDifferentRequestConflicts", testWalletReuseConflict},
		{"ConcurrentSameCommandIDOneEntry", testWalletConcurrentSameCommand},
		{"ConcurrentGiftsNeverOverdraw", testWalletConcurrentGifts},
		{"ConcurrentCrossGiftsNoDeadlock", testWalletCrossGifts},
		{"VipUpgradeRenewDowngrade", testWalletVip},
		{"VipInsufficientWritesNothing", testWalletVipInsufficient},
		{"ListOutboxAfterPages", testWalletOutboxCursor},
		{"AppsIsolated", testWalletAppsIsolated},
		{"DecideErrorWritesNothing", testWalletDecideError},
		{"BadPlanRefused", testWalletBadPlan},
		{"CancelledContextWritesNothing", testWalletCancelled},
		{"ParkedHoldLeavesTheScanUntilResolved", testWalletParkedHold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

const (
	wtApp = "lalu"
	wtNow = int64(1_790_000_000_000)
)

// wtGifts is the suite's catalog. diamond_percent 60 makes the ratio's
// integer rounding visible: 3 roses (30 COIN) yield 18 DIAMOND.
var wtGifts = []configs.GiftConfig{
	{ID: "rose", Price: 10, Heat: 7},
	{ID: "rocket", Price: 9900, Heat: 9900},
	{ID: "free", Price: 0, Heat: 1},
}

// testWalletParkedHold: a parked reservation leaves the reconciler's scan
// (OpenGiftHolds) for the parked list, keeps its money frozen, is parked
// once, and is resolved by the ordinary refund, which keeps the park as
// history; normal reservations beside it are never affected. A reason
// longer than the column is cut, not refused.
func testWalletParkedHold(t *testing.T, s persistence.WalletStore) {
	ctx := t.Context()
	svc, clk := wtService(t, s)
	wtCredit(t, svc, "grant", "alice", wallet.AssetCoin, 1000)
	for _, id := range []string{"g-old", "g-stuck", "g-new"} {
		_, err := svc.HoldGift(ctx, wtGift(id, "alice", "bob", "rose", 1))
		wtOK(t, "hold "+id, err)
		clk.advance(10)
	}
	long := strings.Repeat("é", persistence.MaxParkReason) // 2 bytes each
	parked, err := svc.ParkGift(ctx, wtApp, "g-stuck", long)
	if err != nil || !parked {
		t.Fatalf("park: %v, %v; want true", parked, err)
	}
	if parked, err := svc.ParkGift(ctx, wtApp, "g-stuck", "again"); err != nil || parked {
		t.Fatalf("park again: %v, %v; want false, nil", parked, err)
	}
	if _, err := svc.ParkGift(ctx, wtApp, "g-none", "x"); !errors.Is(err, wallet.ErrGiftNotReserved) {
		t.Fatalf("park of a gift never reserved: %v, want ErrGiftNotReserved", err)
	}
	open, err := s.OpenGiftHolds(ctx, clk.now()+1, 10)
	wtOK(t, "open holds", err)
	var ids []string
	for _, h := range open {
		ids = append(ids, h.CommandID)
	}
	if fmt.Sprint(ids) != "[g-old g-new]" {
		t.Fatalf("scan after the park: %v, want [g-old g-new]", ids)
	}
	pk, err := s.ParkedGiftHolds(ctx, 10)
	wtOK(t, "parked holds", err)
	if len(pk) != 1 || pk[0].CommandID != "g-stuck" || pk[0].ParkedAtMs == 0 || pk[0].State != persistence.HoldOpen {
		t.Fatalf("parked list: %+v", pk)
	}
	if r := pk[0].ParkReason; len(r) > persistence.MaxParkReason || !utf8.ValidString(r) || !strings.HasPrefix(long, r) || len(r) < persistence.MaxParkReason-1 {
		t.Fatalf("park reason of %d bytes (valid UTF-8 %v), want the first %d bytes of the failure", len(r), utf8.ValidString(r), persistence.MaxParkReason)
	}
	st, err := s.GiftHoldStats(ctx)
	wtOK(t, "stats", err)
	if st.Open != 3 || st.Parked != 1 || st.OldestCreatedAtMs != wtNow {
		t.Fatalf("stats %+v, want 3 open, 1 parked, oldest %d", st, wtNow)
	}
	if a := wtAccount(t, s, wtApp, "alice", wallet.AssetCoin); a.Available != 970 || a.Frozen != 30 {
		t.Fatalf("alice after a park: %d available, %d frozen; want 970, 30 (a park moves no money)", a.Available, a.Frozen)
	}
	first, err := svc.RefundGift(ctx, wtApp, "g-stuck")
	wtOK(t, "refund parked", err)
	again, err := svc.RefundGift(ctx, wtApp, "g-stuck")
	if err != nil || again != first {
		t.Fatalf("refund again: %+v, %v; want %+v", again, err, first)
	}
	if _, err := svc.ConfirmGift(ctx, wtApp, "g-stuck"); !errors.Is(err, wallet.ErrGiftSettled) {
		t.Fatalf("confirm after refund: %v, want ErrGiftSettled", err)
	}
	h, err := s.GiftHold(ctx, wtApp, "g-stuck")
	wtOK(t, "read resolved", err)
	if h.State != persistence.HoldRefunded || h.ParkedAtMs != pk[0].ParkedAtMs {
		t.Fatalf("resolved hold %+v: want refunded, park time kept", h)
	}
	if pk, err := s.ParkedGiftHolds(ctx, 10); err != nil || len(pk) != 0 {
		t.Fatalf("parked list after the resolve: %+v, %v", pk, err)
	}
	_, err = svc.ConfirmGift(ctx, wtApp, "g-old")
	wtOK(t, "confirm a normal hold", err)
	st, err = s.GiftHoldStats(ctx)
	wtOK(t, "stats", err)
	if st.Open != 1 || st.Parked != 0 {
		t.Fatalf("stats after: %+v, want 1 open, 0 parked", st)
	}
	if a := wtAccount(t, s, wtApp, "alice", wallet.AssetCoin); a.Available != 980 || a.Frozen != 10 {
		t.Fatalf("alice at the end: %d available, %d frozen; want 980, 10", a.Available, a.Frozen)
	}
}

// wtService returns a Service over s with a clock the test can move and
// transaction ids tx-1, tx-2, ... (unique per service).
func wtService(t *testing.T, s persistence.WalletStore) (*wallet.Service, *wtClock) {
	t.Helper()
	clk := &wtClock{ms: wtNow}
	var mu sync.Mutex
	n := 0
	svc, err := wallet.NewService(s, wtGifts, configs.WalletConfig{DiamondPercent: 60},
		wallet.WithClock(clk.now),
		wallet.WithTxIDs(func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return fmt.Sprintf("tx-%d", n)
		}))
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return svc, clk
}

type wtClock struct {
	mu sync.Mutex
	ms int64
}

func (c *wtClock) now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ms
}

func (c *wtClock) advance(ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ms += ms
}

func wtOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func wtIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

func wtCredit(t *testing.T, svc *wallet.Service, cmd, user, asset string, amount int64) wallet.CreditResult {
	t.Helper()
	r, err := svc.Credit(t.Context(), wallet.CreditRequest{AppCode: wtApp, CommandID: cmd, UserID: user, AssetType: asset, Amount: amount})
	wtOK(t, "Credit "+cmd, err)
	return r
}

func wtGift(cmd, from, to, gift string, count int64) wallet.DebitGiftRequest {
	return wallet.DebitGiftRequest{AppCode: wtApp, CommandID: cmd, RoomID: "room-1", FromUserID: from, ToUserID: to, GiftID: gift, Count: count}
}

// wtAccount returns the stored account (zero when it does not exist).
func wtAccount(t *testing.T, s persistence.WalletStore, app, user, asset string) persistence.Account {
	t.Helper()
	accs, err := s.Accounts(t.Context(), app, user)
	wtOK(t, "Accounts", err)
	for _, a := range accs {
		if a.AssetType == asset {
			return a
		}
	}
	return persistence.Account{AppCode: app, UserID: user, AssetType: asset}
}

func wtWantBalance(t *testing.T, s persistence.WalletStore, user, asset string, available, version int64) {
	t.Helper()
	a := wtAccount(t, s, wtApp, user, asset)
	if a.Available != available || a.BalanceVersion != version || a.Frozen != 0 {
		t.Fatalf("%s %s: available %d frozen %d version %d, want available %d frozen 0 version %d",
			user, asset, a.Available, a.Frozen, a.BalanceVersion, available, version)
	}
}

func wtOutbox(t *testing.T, s persistence.WalletStore) []persistence.WalletOutboxRecord {
	t.Helper()
	var all []persistence.WalletOutboxRecord
	after := int64(0)
	for {
		rows, err := s.ListOutboxAfter(t.Context(), after, 100)
		wtOK(t, "ListOutboxAfter", err)
		if len(rows) == 0 {
			return all
		}
		all = append(all, rows...)
		after = rows[len(rows)-1].ID
	}
}

func wtLedger(t *testing.T, s persistence.WalletStore, user, asset string) []persistence.LedgerEntry {
	t.Helper()
	es, err := s.Ledger(t.Context(), persistence.AccountKey{AppCode: wtApp, UserID: user, AssetType: asset})
	wtOK(t, "Ledger", err)
	return es
}

// seed 003's field lists, exactly.
var (
	balanceChangedFields = []string{
		"event_type", "event_id", "app_code", "transaction_id", "command_id", "user_id", "asset_type",
		"available_delta", "frozen_delta", "available_after", "frozen_after", "balance_version",
		"created_at_ms", "source_created_at_ms", "metadata",
	}
	vipActivatedFields = []string{
		"event_type", "event_id", "app_code", "transaction_id", "command_id", "user_id", "asset_type",
		"source", "action", "previous_level", "level", "vip_name", "started_at_ms", "expires_at_ms",
		"reward_resource_group_id", "resource_grant_id", "reward_items", "source_created_at_ms",
	}
)

// wtPayload checks the row's payload has exactly the seed's fields and
// decodes it into out.
func wtPayload(t *testing.T, row persistence.WalletOutboxRecord, fields []string, out any) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(row.Payload, &m); err != nil {
		t.Fatalf("outbox %s payload %s: %v", row.EventID, row.Payload, err)
	}
	got := make([]string, 0, len(m))
	for k := range m {
		got = append(got, k)
	}
	want := slices.Clone(fields)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("outbox %s payload fields\n got %v\nwant %v", row.EventID, got, want)
	}
	dec := json.NewDecoder(bytes.NewReader(row.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("outbox %s payload decode: %v", row.EventID, err)
	}
}

func testWalletCredit(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	r := wtCredit(t, svc, "top-1", "u1", wallet.AssetCoin, 1000)
	if r.TransactionID != "tx-1" || r.AvailableAfter != 1000 || r.BalanceVersion != 1 || r.Duplicate {
		t.Fatalf("Credit result %+v", r)
	}
	r = wtCredit(t, svc, "top-2", "u1", wallet.AssetCoin, 234)
	if r.AvailableAfter != 1234 || r.BalanceVersion != 2 {
		t.Fatalf("second Credit result %+v", r)
	}
	wtWantBalance(t, s, "u1", wallet.AssetCoin, 1234, 2)
	b, err := svc.GetBalances(t.Context(), wtApp, "u1")
	wtOK(t, "GetBalances", err)
	if len(b.Accounts) != 2 || b.Accounts[0].AssetType != wallet.AssetCoin || b.Accounts[0].Available != 1234 ||
		b.Accounts[1].AssetType != wallet.AssetDiamond || b.Accounts[1].Available != 0 || b.Accounts[1].BalanceVersion != 0 {
		t.Fatalf("GetBalances %+v", b.Accounts)
	}
	if b.VipActiveLevel != 0 {
		t.Fatalf("VIP level of a new user %d", b.VipActiveLevel)
	}

	led := wtLedger(t, s, "u1", wallet.AssetCoin)
	want := []persistence.LedgerEntry{
		{TransactionID: "tx-1", CommandID: "top-1", AppCode: wtApp, UserID: "u1", AssetType: wallet.AssetCoin, AvailableDelta: 1000, AvailableAfter: 1000, BalanceVersion: 1, CreatedAtMs: wtNow},
		{TransactionID: "tx-2", CommandID: "top-2", AppCode: wtApp, UserID: "u1", AssetType: wallet.AssetCoin, AvailableDelta: 234, AvailableAfter: 1234, BalanceVersion: 2, CreatedAtMs: wtNow},
	}
	if !reflect.DeepEqual(led, want) {
		t.Fatalf("ledger\n got %+v\nwant %+v", led, want)
	}
	rec, err := s.Transaction(t.Context(), wtApp, "top-1")
	wtOK(t, "Transaction", err)
	if rec.TransactionID != "tx-1" || rec.Kind != wallet.KindCredit || rec.CreatedAtMs != wtNow {
		t.Fatalf("transaction record %+v", rec)
	}

	rows := wtOutbox(t, s)
	if len(rows) != 2 {
		t.Fatalf("outbox has %d rows, want 2", len(rows))
	}
	row := rows[0]
	if row.EventID != "tx-1:WalletBalanceChanged:u1:COIN" || row.AppCode != wtApp || row.UserID != "u1" ||
		row.EventType != persistence.EventBalanceChanged || row.Status != persistence.OutboxPending ||
		row.CreatedAtMs != wtNow || row.UpdatedAtMs != wtNow || row.ID <= 0 || rows[1].ID <= row.ID {
		t.Fatalf("outbox row %+v", row)
	}
	var p wallet.BalanceChanged
	wtPayload(t, row, balanceChangedFields, &p)
	wantP := wallet.BalanceChanged{
		EventType: "WalletBalanceChanged", EventID: "tx-1:WalletBalanceChanged:u1:COIN", AppCode: wtApp,
		TransactionID: "tx-1", CommandID: "top-1", UserID: "u1", AssetType: "COIN",
		AvailableDelta: 1000, AvailableAfter: 1000, BalanceVersion: 1,
		CreatedAtMs: wtNow, SourceCreatedAtMs: wtNow, Metadata: map[string]string{"reason": "topup"},
	}
	if !reflect.DeepEqual(p, wantP) {
		t.Fatalf("payload\n got %+v\nwant %+v", p, wantP)
	}
}

func testWalletGift(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 100)
	res, err := svc.DebitGift(t.Context(), wtGift("gift-1", "alice", "bob", "rose", 3))
	wtOK(t, "DebitGift", err)
	want := wallet.DebitGiftResult{TransactionID: "tx-2", PriceTotal: 30, HeatValue: 21, DiamondTotal: 18, SenderCoinAfter: 70, ReceiverDiamondAfter: 18}
	if res != want {
		t.Fatalf("DebitGift\n got %+v\nwant %+v", res, want)
	}
	wtWantBalance(t, s, "alice", wallet.AssetCoin, 70, 2)
	wtWantBalance(t, s, "bob", wallet.AssetDiamond, 18, 1)
	wtWantBalance(t, s, "bob", wallet.AssetCoin, 0, 0)

	rows := wtOutbox(t, s)[1:]
	if len(rows) != 2 {
		t.Fatalf("gift wrote %d outbox rows, want 2", len(rows))
	}
	byID := map[string]persistence.WalletOutboxRecord{}
	for _, r := range rows {
		byID[r.EventID] = r
	}
	var ps, pr wallet.BalanceChanged
	wtPayload(t, byID["tx-2:WalletBalanceChanged:alice:COIN"], balanceChangedFields, &ps)
	wtPayload(t, byID["tx-2:WalletBalanceChanged:bob:DIAMOND"], balanceChangedFields, &pr)
	meta := func(reason, other string) map[string]string {
		return map[string]string{"reason": reason, "room_id": "room-1", "gift_id": "rose", "gift_count": "3", "counterparty_user_id": other}
	}
	wantS := wallet.BalanceChanged{
		EventType: "WalletBalanceChanged", EventID: "tx-2:WalletBalanceChanged:alice:COIN", AppCode: wtApp,
		TransactionID: "tx-2", CommandID: "gift-1", UserID: "alice", AssetType: "COIN",
		AvailableDelta: -30, AvailableAfter: 70, BalanceVersion: 2,
		CreatedAtMs: wtNow, SourceCreatedAtMs: wtNow, Metadata: meta("gift_send", "bob"),
	}
	wantR := wallet.BalanceChanged{
		EventType: "WalletBalanceChanged", EventID: "tx-2:WalletBalanceChanged:bob:DIAMOND", AppCode: wtApp,
		TransactionID: "tx-2", CommandID: "gift-1", UserID: "bob", AssetType: "DIAMOND",
		AvailableDelta: 18, AvailableAfter: 18, BalanceVersion: 1,
		CreatedAtMs: wtNow, SourceCreatedAtMs: wtNow, Metadata: meta("gift_receive", "alice"),
	}
	if !reflect.DeepEqual(ps, wantS) || !reflect.DeepEqual(pr, wantR) {
		t.Fatalf("gift payloads\n got %+v\n     %+v\nwant %+v\n     %+v", ps, pr, wantS, wantR)
	}
	if byID[wantS.EventID].UserID != "alice" || byID[wantR.EventID].UserID != "bob" {
		t.Fatalf("outbox user_id columns %+v", rows)
	}

	// A free gift changes no balance: no ledger entry, no event, but the
	// command_id is recorded.
	res, err = svc.DebitGift(t.Context(), wtGift("gift-free", "alice", "bob", "free", 5))
	wtOK(t, "free DebitGift", err)
	if res.PriceTotal != 0 || res.HeatValue != 5 || res.SenderCoinAfter != 70 || res.ReceiverDiamondAfter != 18 {
		t.Fatalf("free gift result %+v", res)
	}
	if n := len(wtOutbox(t, s)); n != 3 {
		t.Fatalf("free gift: outbox has %d rows, want 3", n)
	}
	wtWantBalance(t, s, "alice", wallet.AssetCoin, 70, 2)
	if _, err := s.Transaction(t.Context(), wtApp, "gift-free"); err != nil {
		t.Fatalf("free gift not recorded: %v", err)
	}
}

// wtSnapshot is everything a user-visible check compares before and after
// a refused operation.
func wtSnapshot(t *testing.T, s persistence.WalletStore, users ...string) string {
	t.Helper()
	out := ""
	for _, u := range users {
		accs, err := s.Accounts(t.Context(), wtApp, u)
		wtOK(t, "Accounts", err)
		for _, a := range accs {
			if a.BalanceVersion == 0 && a.Available == 0 {
				continue // an empty account a backend created while locking
			}
			out += fmt.Sprintf("%+v|", a)
		}
		for _, asset := range wallet.Assets {
			out += fmt.Sprintf("%d|", len(wtLedger(t, s, u, asset)))
		}
		v, err := s.Vip(t.Context(), wtApp, u)
		if err != nil && !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("Vip: %v", err)
		}
		out += fmt.Sprintf("%+v|", v)
	}
	return out + fmt.Sprintf("outbox=%d", len(wtOutbox(t, s)))
}

func testWalletInsufficient(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 29)
	before := wtSnapshot(t, s, "alice", "bob")
	_, err := svc.DebitGift(t.Context(), wtGift("gift-1", "alice", "bob", "rose", 3))
	wtIs(t, "DebitGift over balance", err, wallet.ErrInsufficientBalance)
	wtIs(t, "DebitGift over balance", err, errclass.Precondition)
	if after := wtSnapshot(t, s, "alice", "bob"); after != before {
		t.Fatalf("refused gift changed the wallet\nbefore %s\nafter  %s", before, after)
	}
	_, err = s.Transaction(t.Context(), wtApp, "gift-1")
	wtIs(t, "Transaction of a refused gift", err, persistence.ErrNotFound)
	// A refused command_id is not burnt: once funded, the same id works.
	wtCredit(t, svc, "top-2", "alice", wallet.AssetCoin, 1)
	res, err := svc.DebitGift(t.Context(), wtGift("gift-1", "alice", "bob", "rose", 3))
	wtOK(t, "DebitGift after top-up", err)
	if res.Duplicate || res.SenderCoinAfter != 0 {
		t.Fatalf("DebitGift after top-up %+v", res)
	}
}

func testWalletInvalidGift(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 1000)
	before := wtSnapshot(t, s, "alice", "bob")
	for _, tc := range []struct {
		name string
		req  wallet.DebitGiftRequest
	}{
		{"unknown gift", wtGift("g1", "alice", "bob", "nope", 1)},
		{"self gift", wtGift("g2", "alice", "alice", "rose", 1)},
		{"zero count", wtGift("g3", "alice", "bob", "rose", 0)},
		{"huge count", wtGift("g4", "alice", "bob", "rose", wallet.MaxGiftCount+1)},
		{"no command id", wtGift("", "alice", "bob", "rose", 1)},
		{"colon in user", wtGift("g5", "alice", "b:ob", "rose", 1)},
	} {
		_, err := svc.DebitGift(t.Context(), tc.req)
		wtIs(t, tc.name, err, errclass.Invalid)
	}
	_, err := svc.Credit(t.Context(), wallet.CreditRequest{AppCode: wtApp, CommandID: "c1", UserID: "bob", AssetType: "GOLD", Amount: 1})
	wtIs(t, "credit unknown asset", err, errclass.Invalid)
	_, err = svc.Credit(t.Context(), wallet.CreditRequest{AppCode: wtApp, CommandID: "c2", UserID: "bob", AssetType: wallet.AssetCoin, Amount: -5})
	wtIs(t, "credit negative", err, errclass.Invalid)
	if after := wtSnapshot(t, s, "alice", "bob"); after != before {
		t.Fatalf("invalid requests changed the wallet\nbefore %s\nafter  %s", before, after)
	}
}

func testWalletRepeat(t *testing.T, s persistence.WalletStore) {
	svc, clk := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 100)
	first, err := svc.DebitGift(t.Context(), wtGift("gift-1", "alice", "bob", "rose", 2))
	wtOK(t, "DebitGift", err)
	before := wtSnapshot(t, s, "alice", "bob")
	clk.advance(5000)
	again, err := svc.DebitGift(t.Context(), wtGift("gift-1", "alice", "bob", "rose", 2))
	wtOK(t, "repeated DebitGift", err)
	if !again.Duplicate || first.Duplicate {
		t.Fatalf("Duplicate flags: first %v, repeat %v", first.Duplicate, again.Duplicate)
	}
	again.Duplicate = false
	if again != first {
		t.Fatalf("repeat result %+v, first %+v", again, first)
	}
	if after := wtSnapshot(t, s, "alice", "bob"); after != before {
		t.Fatalf("repeat changed the wallet\nbefore %s\nafter  %s", before, after)
	}
	c1 := wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 100)
	if !c1.Duplicate || c1.AvailableAfter != 100 || c1.BalanceVersion != 1 {
		t.Fatalf("repeated Credit %+v, want the first result", c1)
	}
}

func testWalletReuseConflict(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 100)
	_, err := svc.DebitGift(t.Context(), wtGift("gift-1", "alice", "bob", "rose", 2))
	wtOK(t, "DebitGift", err)
	before := wtSnapshot(t, s, "alice", "bob")
	_, err = svc.DebitGift(t.Context(), wtGift("gift-1", "alice", "bob", "rose", 3))
	wtIs(t, "same command_id, other count", err, wallet.ErrCommandReused)
	_, err = svc.Credit(t.Context(), wallet.CreditRequest{AppCode: wtApp, CommandID: "gift-1", UserID: "alice", AssetType: wallet.AssetCoin, Amount: 5})
	wtIs(t, "same command_id, other operation", err, wallet.ErrCommandReused)
	if after := wtSnapshot(t, s, "alice", "bob"); after != before {
		t.Fatalf("conflicting reuse changed the wallet\nbefore %s\nafter  %s", before, after)
	}
}

func testWalletConcurrentSameCommand(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 100_000)
	const n = 10
	results := make([]wallet.DebitGiftResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = svc.DebitGift(context.Background(), wtGift("gift-x", "alice", "bob", "rocket", 1))
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("attempt %d: %v", i, errs[i])
		}
		if !results[i].Duplicate {
			fresh++
		}
		if results[i].TransactionID != results[0].TransactionID {
			t.Fatalf("attempts got transactions %q and %q", results[0].TransactionID, results[i].TransactionID)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d attempts were not duplicates, want exactly 1", fresh)
	}
	if l := wtLedger(t, s, "alice", wallet.AssetCoin); len(l) != 2 {
		t.Fatalf("alice COIN ledger has %d entries, want 2 (credit + one gift)", len(l))
	}
	if l := wtLedger(t, s, "bob", wallet.AssetDiamond); len(l) != 1 {
		t.Fatalf("bob DIAMOND ledger has %d entries, want 1", len(l))
	}
	count := map[string]int{}
	for _, r := range wtOutbox(t, s) {
		count[r.UserID+"/"+r.EventType]++
	}
	if count["alice/WalletBalanceChanged"] != 2 || count["bob/WalletBalanceChanged"] != 1 {
		t.Fatalf("outbox rows per user %v, want alice 2 (credit + gift), bob 1", count)
	}
	wtWantBalance(t, s, "alice", wallet.AssetCoin, 100_000-9900, 2)
	wtWantBalance(t, s, "bob", wallet.AssetDiamond, 9900*60/100, 1)
}

// wtCheckLedger checks one account's history: versions 1..n without gaps,
// every after = previous after + delta, never negative, and the last after
// (and the sum of deltas) equal to the stored balance. It returns n.
func wtCheckLedger(t *testing.T, s persistence.WalletStore, user, asset string) int64 {
	t.Helper()
	led := wtLedger(t, s, user, asset)
	var sum, prev int64
	for i, e := range led {
		if e.BalanceVersion != int64(i+1) {
			t.Fatalf("%s %s ledger entry %d has version %d (gap or disorder)", user, asset, i, e.BalanceVersion)
		}
		if e.AvailableAfter != prev+e.AvailableDelta || e.AvailableAfter < 0 {
			t.Fatalf("%s %s ledger v%d: after %d, previous %d, delta %d", user, asset, e.BalanceVersion, e.AvailableAfter, prev, e.AvailableDelta)
		}
		prev = e.AvailableAfter
		sum += e.AvailableDelta
	}
	a := wtAccount(t, s, wtApp, user, asset)
	if a.Available != sum || a.BalanceVersion != int64(len(led)) {
		t.Fatalf("%s %s: balance %d v%d, ledger sums to %d over %d entries", user, asset, a.Available, a.BalanceVersion, sum, len(led))
	}
	return int64(len(led))
}

func testWalletConcurrentGifts(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 30*10) // 30 roses
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = svc.DebitGift(context.Background(), wtGift(fmt.Sprintf("gift-%02d", i), "alice", fmt.Sprintf("r%d", i%5), "rose", 1))
		}()
	}
	close(start)
	wg.Wait()
	ok, broke := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, wallet.ErrInsufficientBalance):
			broke++
		default:
			t.Fatalf("gift %d: unexpected error %v", i, err)
		}
	}
	if ok != 30 || broke != 20 {
		t.Fatalf("%d gifts succeeded and %d were refused, want 30 and 20", ok, broke)
	}
	wtWantBalance(t, s, "alice", wallet.AssetCoin, 0, 31)
	if v := wtCheckLedger(t, s, "alice", wallet.AssetCoin); v != 31 {
		t.Fatalf("alice has %d ledger entries, want 31", v)
	}
	var diamonds int64
	for r := range 5 {
		u := fmt.Sprintf("r%d", r)
		wtCheckLedger(t, s, u, wallet.AssetDiamond)
		diamonds += wtAccount(t, s, wtApp, u, wallet.AssetDiamond).Available
	}
	if diamonds != 30*6 {
		t.Fatalf("receivers hold %d DIAMOND, want %d", diamonds, 30*6)
	}
	// The outbox carries every version of alice's COIN exactly once.
	var versions []int64
	for _, row := range wtOutbox(t, s) {
		if row.UserID != "alice" {
			continue
		}
		var p wallet.BalanceChanged
		wtPayload(t, row, balanceChangedFields, &p)
		versions = append(versions, p.BalanceVersion)
	}
	slices.Sort(versions)
	for i, v := range versions {
		if v != int64(i+1) {
			t.Fatalf("alice's WalletBalanceChanged versions %v, want 1..31", versions)
		}
	}
	if len(versions) != 31 {
		t.Fatalf("alice has %d WalletBalanceChanged rows, want 31", len(versions))
	}
}

// testWalletCrossGifts sends gifts in every direction between four users
// while they also buy VIP, so transactions lock overlapping account sets in
// every order; a backend must neither deadlock nor fail them.
func testWalletCrossGifts(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	users := []string{"u0", "u1", "u2", "u3"}
	for _, u := range users {
		wtCredit(t, svc, "top-"+u, u, wallet.AssetCoin, 10_000)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	start := make(chan struct{})
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			from, to := users[i%4], users[(i/4+i+1)%4]
			var err error
			if from == to || i%10 == 0 {
				_, err = svc.PurchaseVip(context.Background(), wallet.PurchaseVipRequest{AppCode: wtApp, CommandID: fmt.Sprintf("vip-%d", i), UserID: from, Level: 1})
				if errors.Is(err, wallet.ErrVipDowngrade) {
					err = nil
				}
			} else {
				_, err = svc.DebitGift(context.Background(), wtGift(fmt.Sprintf("x-%d", i), from, to, "rose", int64(1+i%3)))
			}
			if err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of 40 transactions failed, first: %v", len(failures), failures[0])
	}
	var coins, diamonds int64
	for _, u := range users {
		wtCheckLedger(t, s, u, wallet.AssetCoin)
		wtCheckLedger(t, s, u, wallet.AssetDiamond)
		coins += wtAccount(t, s, wtApp, u, wallet.AssetCoin).Available
		diamonds += wtAccount(t, s, wtApp, u, wallet.AssetDiamond).Available
	}
	if coins > 40_000 || coins+diamonds*100/60 > 40_000 {
		t.Fatalf("COIN %d + DIAMOND %d out of 40000 credited", coins, diamonds)
	}
}

func testWalletVip(t *testing.T, s persistence.WalletStore) {
	svc, clk := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 100_000)
	const month = int64(30 * 24 * 3600 * 1000)
	buy := func(cmd string, level int32, source string) (wallet.PurchaseVipResult, error) {
		return svc.PurchaseVip(t.Context(), wallet.PurchaseVipRequest{AppCode: wtApp, CommandID: cmd, UserID: "alice", Level: level, Source: source})
	}
	r, err := buy("vip-1", 3, "")
	wtOK(t, "PurchaseVip 3", err)
	want := wallet.PurchaseVipResult{TransactionID: "tx-2", Action: "upgrade", PreviousLevel: 0, Level: 3, VipName: "VIP3",
		StartedAtMs: wtNow, ExpiresAtMs: wtNow + month, PricePaid: 6000, CoinAfter: 94_000}
	if r != want {
		t.Fatalf("PurchaseVip 3\n got %+v\nwant %+v", r, want)
	}
	rows := wtOutbox(t, s)
	if len(rows) != 3 {
		t.Fatalf("outbox has %d rows after a VIP purchase, want 3 (credit, debit, VipActivated)", len(rows))
	}
	var vipRow persistence.WalletOutboxRecord
	for _, row := range rows {
		if row.EventType == persistence.EventVipActivated {
			vipRow = row
		}
	}
	var p wallet.VipActivated
	wtPayload(t, vipRow, vipActivatedFields, &p)
	wantP := wallet.VipActivated{
		EventType: "VipActivated", EventID: "tx-2:VipActivated:alice", AppCode: wtApp, TransactionID: "tx-2",
		CommandID: "vip-1", UserID: "alice", AssetType: "VIP", Source: "vip_purchase", Action: "upgrade",
		PreviousLevel: 0, Level: 3, VipName: "VIP3", StartedAtMs: wtNow, ExpiresAtMs: wtNow + month,
		RewardResourceGroupID: 103, ResourceGrantID: "", RewardItems: []wallet.RewardItem{}, SourceCreatedAtMs: wtNow,
	}
	if !reflect.DeepEqual(p, wantP) || vipRow.UserID != "alice" {
		t.Fatalf("VipActivated\n got %+v\nwant %+v", p, wantP)
	}
	wtWantBalance(t, s, "alice", wallet.AssetCoin, 94_000, 2)

	clk.advance(24 * 3600 * 1000)
	r, err = buy("vip-2", 3, wallet.SourceVipPurchase)
	wtOK(t, "renew", err)
	if r.Action != "renew" || r.PreviousLevel != 3 || r.StartedAtMs != wtNow || r.ExpiresAtMs != wtNow+2*month || r.CoinAfter != 88_000 {
		t.Fatalf("renew %+v", r)
	}
	r, err = buy("vip-3", 6, wallet.SourceVipPurchase)
	wtOK(t, "upgrade", err)
	now := clk.now()
	if r.Action != "upgrade" || r.PreviousLevel != 3 || r.StartedAtMs != now || r.ExpiresAtMs != now+month || r.CoinAfter != 28_000 {
		t.Fatalf("upgrade %+v", r)
	}
	before := wtSnapshot(t, s, "alice")
	_, err = buy("vip-4", 2, wallet.SourceVipPurchase)
	wtIs(t, "downgrade", err, wallet.ErrVipDowngrade)
	if after := wtSnapshot(t, s, "alice"); after != before {
		t.Fatalf("refused downgrade changed the wallet\nbefore %s\nafter  %s", before, after)
	}
	n := len(wtOutbox(t, s))
	r, err = buy("vip-5", 6, wallet.SourceAdminGrant)
	wtOK(t, "admin grant", err)
	if r.Action != "renew" || r.PricePaid != 0 || r.CoinAfter != 28_000 || r.ExpiresAtMs != now+2*month {
		t.Fatalf("admin grant %+v", r)
	}
	rows = wtOutbox(t, s)[n:]
	if len(rows) != 1 || rows[0].EventType != persistence.EventVipActivated {
		t.Fatalf("a free grant wrote %+v, want one VipActivated", rows)
	}
	wtPayload(t, rows[0], vipActivatedFields, &p)
	if p.Source != "admin_grant" || p.Action != "renew" || p.PreviousLevel != 6 {
		t.Fatalf("admin grant payload %+v", p)
	}
	b, err := svc.GetBalances(t.Context(), wtApp, "alice")
	wtOK(t, "GetBalances", err)
	if b.VipActiveLevel != 6 || b.Vip.Level != 6 || b.Vip.ExpiresAtMs != now+2*month {
		t.Fatalf("GetBalances VIP %+v level %d", b.Vip, b.VipActiveLevel)
	}
	clk.advance(3 * month)
	r, err = buy("vip-6", 1, wallet.SourceActivityGrant)
	wtOK(t, "after expiry", err)
	if r.Action != "upgrade" || r.PreviousLevel != 0 || r.Level != 1 {
		t.Fatalf("after expiry %+v", r)
	}
	wtCheckLedger(t, s, "alice", wallet.AssetCoin)
	_, err = buy("vip-7", 99, "")
	wtIs(t, "unknown level", err, errclass.Invalid)
	_, err = buy("vip-8", 1, "gift")
	wtIs(t, "unknown source", err, errclass.Invalid)
}

func testWalletVipInsufficient(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 999)
	before := wtSnapshot(t, s, "alice")
	_, err := svc.PurchaseVip(t.Context(), wallet.PurchaseVipRequest{AppCode: wtApp, CommandID: "vip-1", UserID: "alice", Level: 1})
	wtIs(t, "VIP over balance", err, wallet.ErrInsufficientBalance)
	if after := wtSnapshot(t, s, "alice"); after != before {
		t.Fatalf("refused VIP purchase changed the wallet\nbefore %s\nafter  %s", before, after)
	}
	_, err = s.Vip(t.Context(), wtApp, "alice")
	wtIs(t, "Vip after refused purchase", err, persistence.ErrNotFound)
}

func testWalletOutboxCursor(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	for i := range 5 {
		wtCredit(t, svc, fmt.Sprintf("top-%d", i), fmt.Sprintf("u%d", i), wallet.AssetDiamond, int64(i+1))
	}
	var got []string
	after := int64(0)
	for page := 0; page < 10; page++ {
		rows, err := s.ListOutboxAfter(t.Context(), after, 2)
		wtOK(t, "ListOutboxAfter", err)
		if len(rows) > 2 {
			t.Fatalf("limit 2 returned %d rows", len(rows))
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			if r.ID <= after {
				t.Fatalf("id %d not after cursor %d", r.ID, after)
			}
			after = r.ID
			got = append(got, r.UserID)
		}
	}
	if !slices.Equal(got, []string{"u0", "u1", "u2", "u3", "u4"}) {
		t.Fatalf("cursor pages gave users %v, want u0..u4 in order", got)
	}
	rows, err := s.ListOutboxAfter(t.Context(), 0, 0)
	wtOK(t, "ListOutboxAfter limit 0", err)
	if len(rows) != 0 {
		t.Fatalf("limit 0 returned %d rows", len(rows))
	}
}

func testWalletAppsIsolated(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	for i, app := range []string{"app-a", "app-b"} {
		r, err := svc.Credit(t.Context(), wallet.CreditRequest{AppCode: app, CommandID: "same", UserID: "u", AssetType: wallet.AssetCoin, Amount: int64(100 * (i + 1))})
		wtOK(t, "Credit "+app, err)
		if r.Duplicate {
			t.Fatalf("command_id of %s treated as a duplicate of another app's", app)
		}
	}
	if a := wtAccount(t, s, "app-a", "u", wallet.AssetCoin); a.Available != 100 {
		t.Fatalf("app-a balance %d, want 100", a.Available)
	}
	if a := wtAccount(t, s, "app-b", "u", wallet.AssetCoin); a.Available != 200 {
		t.Fatalf("app-b balance %d, want 200", a.Available)
	}
}

var errWtDecide = errors.New("wallettest: decide refuses")

func testWalletDecideError(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 50)
	before := wtSnapshot(t, s, "alice", "bob")
	var seen persistence.WalletView
	tx := persistence.WalletTx{
		AppCode: wtApp, CommandID: "cmd-x",
		Lock:    []persistence.AccountKey{{AppCode: wtApp, UserID: "bob", AssetType: wallet.AssetDiamond}, {AppCode: wtApp, UserID: "alice", AssetType: wallet.AssetCoin}},
		LockVip: "alice",
		Decide: func(v persistence.WalletView) (persistence.WalletPlan, error) {
			seen = v
			return persistence.WalletPlan{}, errWtDecide
		},
	}
	_, err := s.Exec(t.Context(), tx)
	wtIs(t, "Exec with refusing Decide", err, errWtDecide)
	alice := seen.Accounts[persistence.AccountKey{AppCode: wtApp, UserID: "alice", AssetType: wallet.AssetCoin}]
	bob := seen.Accounts[persistence.AccountKey{AppCode: wtApp, UserID: "bob", AssetType: wallet.AssetDiamond}]
	if len(seen.Accounts) != 2 || alice.Available != 50 || alice.BalanceVersion != 1 ||
		bob.Available != 0 || bob.BalanceVersion != 0 || bob.UserID != "bob" || bob.AssetType != wallet.AssetDiamond ||
		seen.Vip.Level != 0 || seen.Vip.UserID != "alice" {
		t.Fatalf("Decide saw %+v", seen)
	}
	if after := wtSnapshot(t, s, "alice", "bob"); after != before {
		t.Fatalf("refused Decide changed the wallet\nbefore %s\nafter  %s", before, after)
	}
	_, err = s.Transaction(t.Context(), wtApp, "cmd-x")
	wtIs(t, "Transaction after refused Decide", err, persistence.ErrNotFound)
}

func testWalletBadPlan(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 50)
	before := wtSnapshot(t, s, "alice", "bob")
	key := persistence.AccountKey{AppCode: wtApp, UserID: "alice", AssetType: wallet.AssetCoin}
	for _, tc := range []struct {
		name string
		mod  func(v persistence.WalletView) persistence.WalletPlan
	}{
		{"version skips", func(v persistence.WalletView) persistence.WalletPlan {
			a := v.Accounts[key]
			a.Available -= 10
			a.BalanceVersion += 2
			return wtPlanFor(a, -10)
		}},
		{"negative balance", func(v persistence.WalletView) persistence.WalletPlan {
			a := v.Accounts[key]
			a.Available -= 60
			a.BalanceVersion++
			return wtPlanFor(a, -60)
		}},
		{"unlocked account", func(v persistence.WalletView) persistence.WalletPlan {
			a := persistence.Account{AppCode: wtApp, UserID: "bob", AssetType: wallet.AssetCoin, Available: 1000, BalanceVersion: 1}
			return wtPlanFor(a, 1000)
		}},
	} {
		tx := persistence.WalletTx{AppCode: wtApp, CommandID: "bad", Lock: []persistence.AccountKey{key},
			Decide: func(v persistence.WalletView) (persistence.WalletPlan, error) { return tc.mod(v), nil }}
		if _, err := s.Exec(t.Context(), tx); err == nil {
			t.Fatalf("%s: Exec accepted a plan that breaks the invariants", tc.name)
		}
	}
	if after := wtSnapshot(t, s, "alice", "bob"); after != before {
		t.Fatalf("refused plans changed the wallet\nbefore %s\nafter  %s", before, after)
	}
}

// wtPlanFor builds a one-account plan of command "bad" with a matching
// ledger entry and event, so only the account state itself is wrong.
func wtPlanFor(a persistence.Account, delta int64) persistence.WalletPlan {
	return persistence.WalletPlan{
		NowMs:    wtNow,
		Record:   persistence.WalletTxRecord{TransactionID: "tx-bad", AppCode: wtApp, CommandID: "bad", Kind: "test", Result: json.RawMessage(`{}`)},
		Accounts: []persistence.Account{a},
		Ledger: []persistence.LedgerEntry{{TransactionID: "tx-bad", CommandID: "bad", AppCode: a.AppCode, UserID: a.UserID, AssetType: a.AssetType,
			AvailableDelta: delta, AvailableAfter: a.Available, BalanceVersion: a.BalanceVersion}},
		Outbox: []persistence.WalletOutboxEvent{{EventID: persistence.BalanceEventID("tx-bad", a.UserID, a.AssetType), AppCode: wtApp, UserID: a.UserID,
			EventType: persistence.EventBalanceChanged, Payload: json.RawMessage(`{}`)}},
	}
}

func testWalletCancelled(t *testing.T, s persistence.WalletStore) {
	svc, _ := wtService(t, s)
	wtCredit(t, svc, "top", "alice", wallet.AssetCoin, 50)
	before := wtSnapshot(t, s, "alice", "bob")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := svc.DebitGift(ctx, wtGift("gift-1", "alice", "bob", "rose", 1))
	wtIs(t, "DebitGift with a cancelled context", err, wallet.ErrUnavailable)
	if after := wtSnapshot(t, s, "alice", "bob"); after != before {
		t.Fatalf("cancelled gift changed the wallet\nbefore %s\nafter  %s", before, after)
	}
}

// BenchDebits measures DebitGift throughput on a store: "hot_user"
// has every debit come from one sender (all transactions queue on one row
// lock), "1000_users" spreads them over 1000 senders. Receivers differ
// from senders, so the only contention is the sender's COIN row. It
// reports debits/s; timing is never asserted.
func BenchDebits(b *testing.B, newStore func(b *testing.B) persistence.WalletStore) {
	for _, tc := range []struct {
		name    string
		senders int
	}{{"hot_user", 1}, {"1000_users", 1000}} {
		b.Run(tc.name, func(b *testing.B) {
			s := newStore(b)
			svc, err := wallet.NewService(s, wtGifts, configs.WalletConfig{DiamondPercent: 60})
			if err != nil {
				b.Fatal(err)
			}
			// Fund the senders in parallel, outside the timer.
			var wg sync.WaitGroup
			errs := make(chan error, tc.senders)
			sem := make(chan struct{}, 16)
			for i := range tc.senders {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					_, err := svc.Credit(context.Background(), wallet.CreditRequest{AppCode: wtApp, CommandID: fmt.Sprintf("fund-%d", i),
						UserID: fmt.Sprintf("s%d", i), AssetType: wallet.AssetCoin, Amount: 1 << 40})
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatalf("fund: %v", err)
			}
			var seq, failed atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					from := fmt.Sprintf("s%d", n%int64(tc.senders))
					_, err := svc.DebitGift(context.Background(), wtGift(fmt.Sprintf("bench-%d", n), from, fmt.Sprintf("r%d", n%64), "rose", 1))
					if err != nil {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d of %d debits failed", f, seq.Load())
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "debits/s")
		})
	}
}
