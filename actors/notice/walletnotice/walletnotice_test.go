package walletnotice

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/persistence"
)

// The seed's field lists, in the seed's order.
var (
	seedBalanceFields = []string{"event_type", "event_id", "app_code", "transaction_id", "command_id", "user_id", "asset_type",
		"available_delta", "frozen_delta", "available_after", "frozen_after", "balance_version", "created_at_ms",
		"source_created_at_ms", "metadata"}
	seedVipFields = []string{"event_type", "event_id", "app_code", "transaction_id", "command_id", "user_id", "asset_type",
		"source", "action", "previous_level", "level", "vip_name", "started_at_ms", "expires_at_ms",
		"reward_resource_group_id", "resource_grant_id", "reward_items", "source_created_at_ms"}
)

func keysOf(t *testing.T, raw []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func balanceRecord(id int64, txID, user string, version int64, payload any) persistence.WalletOutboxRecord {
	eventID := persistence.BalanceEventID(txID, user, wallet.AssetCoin)
	var b []byte
	if payload == nil {
		b, _ = json.Marshal(wallet.BalanceChanged{EventType: persistence.EventBalanceChanged, EventID: eventID, AppCode: "lalu",
			TransactionID: txID, CommandID: "cmd-" + txID, UserID: user, AssetType: wallet.AssetCoin, AvailableDelta: -9900,
			AvailableAfter: 1123123, BalanceVersion: version, CreatedAtMs: 1710000000000, SourceCreatedAtMs: 1710000000000})
	} else {
		b, _ = json.Marshal(payload)
	}
	return persistence.WalletOutboxRecord{ID: id, EventID: eventID, AppCode: "lalu", UserID: user, EventType: persistence.EventBalanceChanged,
		Payload: b, Status: persistence.OutboxPending, CreatedAtMs: 1710000000000 + id}
}

func TestFromOutboxBalanceChanged(t *testing.T) {
	rec := balanceRecord(7, "tx_xxx", "10001", 18, nil)
	d, ok := FromOutbox(rec)
	if !ok {
		t.Fatal("WalletBalanceChanged is a notice")
	}
	want := persistence.NoticeKey{SourceName: persistence.SourceWalletOutbox, AppCode: "lalu", SourceEventID: "tx_xxx:WalletBalanceChanged:10001:COIN", Channel: persistence.ChannelIMC2C}
	if d.NoticeKey != want || d.Ext != ExtWalletNotice || d.UserID != "10001" || d.EventType != persistence.EventBalanceChanged ||
		d.Status != "" || d.SourceCreatedAtMs != rec.CreatedAtMs {
		t.Fatalf("delivery %+v", d)
	}
	if got := keysOf(t, d.Payload); !slices.Equal(got, sorted(seedBalanceFields)) {
		t.Fatalf("payload fields %v, want the seed's %v", got, sorted(seedBalanceFields))
	}
	var p wallet.BalanceChanged
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.BalanceVersion != 18 || p.AvailableDelta != -9900 || p.AvailableAfter != 1123123 || p.Metadata == nil {
		t.Fatalf("payload %+v", p)
	}
	if !strings.Contains(string(d.Payload), `"metadata":{}`) {
		t.Fatalf("metadata must be {} as in the seed: %s", d.Payload)
	}
}

func TestFromOutboxVipActivated(t *testing.T) {
	id := persistence.VipEventID("wtx_1", "10001")
	b, _ := json.Marshal(wallet.VipActivated{EventType: persistence.EventVipActivated, EventID: id, AppCode: "lalu", TransactionID: "wtx_1",
		CommandID: "vip_purchase_10001_6", UserID: "10001", AssetType: wallet.AssetVip, Source: wallet.SourceVipPurchase,
		Action: wallet.ActionUpgrade, PreviousLevel: 3, Level: 6, VipName: "VIP6", StartedAtMs: 1790000000000,
		ExpiresAtMs: 1792592000000, SourceCreatedAtMs: 1790000000000})
	d, ok := FromOutbox(persistence.WalletOutboxRecord{ID: 1, EventID: id, AppCode: "lalu", UserID: "10001", EventType: persistence.EventVipActivated, Payload: b})
	if !ok || d.Ext != ExtVipNotice || d.Status != "" || d.UserID != "10001" {
		t.Fatalf("delivery %+v ok=%v", d, ok)
	}
	if got := keysOf(t, d.Payload); !slices.Equal(got, sorted(seedVipFields)) {
		t.Fatalf("payload fields %v, want the seed's %v", got, sorted(seedVipFields))
	}
	if !strings.Contains(string(d.Payload), `"reward_items":[]`) || !strings.Contains(string(d.Payload), `"level":6`) {
		t.Fatalf("payload %s", d.Payload)
	}
}

func TestFromOutboxIgnoresAndDeadLetters(t *testing.T) {
	if _, ok := FromOutbox(persistence.WalletOutboxRecord{EventType: "WalletSomethingElse", EventID: "x", AppCode: "lalu", UserID: "u"}); ok {
		t.Fatal("an unknown event type became a notice")
	}
	for name, rec := range map[string]persistence.WalletOutboxRecord{
		"not json":      {ID: 1, EventID: "e", AppCode: "lalu", UserID: "u", EventType: persistence.EventBalanceChanged, Payload: []byte("{oops")},
		"other user":    balanceRecord(2, "tx", "u1", 1, wallet.BalanceChanged{EventType: persistence.EventBalanceChanged, EventID: persistence.BalanceEventID("tx", "u1", "COIN"), AppCode: "lalu", UserID: "u2", AssetType: "COIN", BalanceVersion: 1}),
		"no version":    balanceRecord(3, "tx", "u1", 0, wallet.BalanceChanged{EventType: persistence.EventBalanceChanged, EventID: persistence.BalanceEventID("tx", "u1", "COIN"), AppCode: "lalu", UserID: "u1", AssetType: "COIN"}),
		"other eventid": balanceRecord(4, "tx", "u1", 1, wallet.BalanceChanged{EventType: persistence.EventBalanceChanged, EventID: "nope", AppCode: "lalu", UserID: "u1", AssetType: "COIN", BalanceVersion: 1}),
	} {
		d, ok := FromOutbox(rec)
		if !ok || d.Status != persistence.NoticeFailed || !strings.Contains(d.LastError, "corrupt source event") || !json.Valid(d.Payload) || d.SourceEventID != rec.EventID {
			t.Fatalf("%s: %+v ok=%v", name, d, ok)
		}
	}
}

// fakeSource is a wallet_outbox whose rows become visible when the test
// says (a commit), in any id order.
type fakeSource struct {
	mu    sync.Mutex
	rows  map[int64]persistence.WalletOutboxRecord
	reads int
}

func (f *fakeSource) commit(ids ...int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rows == nil {
		f.rows = map[int64]persistence.WalletOutboxRecord{}
	}
	for _, id := range ids {
		f.rows[id] = balanceRecord(id, fmt.Sprint("tx", id), "u1", id, nil)
	}
}

func (f *fakeSource) ListOutboxAfter(_ context.Context, afterID int64, limit int) ([]persistence.WalletOutboxRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	var ids []int64
	for id := range f.rows {
		if id > afterID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []persistence.WalletOutboxRecord
	for _, id := range ids[:min(limit, len(ids))] {
		out = append(out, f.rows[id])
	}
	return out, nil
}

func scanIDs(t *testing.T, s *Scanner, nowMs int64, limit int) ([]string, notice.ScanResult) {
	t.Helper()
	res, err := s.Scan(context.Background(), nowMs, limit)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range res.Deliveries {
		ids = append(ids, strings.Split(d.SourceEventID, ":")[0])
	}
	return ids, res
}

// Ids that commit out of order are picked up late and the persisted
// cursor never passes a gap that may still fill; a gap that never fills
// (a rolled-back id) is passed after settle.
func TestScannerWaitsForLateIDs(t *testing.T) {
	src := &fakeSource{}
	s := NewScanner(src, WithSettle(10*time.Second))
	s.Reset(persistence.NoticeCursor{})
	src.commit(1, 2, 4, 5) // 3 is still in flight
	ids, res := scanIDs(t, s, 1000, 100)
	if !slices.Equal(ids, []string{"tx1", "tx2", "tx4", "tx5"}) || res.Safe.Num != 2 || res.More {
		t.Fatalf("first scan %v safe %+v", ids, res.Safe)
	}
	src.commit(3, 6)
	ids, res = scanIDs(t, s, 2000, 100)
	if !slices.Equal(ids, []string{"tx6", "tx3"}) || res.Safe.Num != 6 {
		t.Fatalf("second scan %v safe %+v: want the new row and the late one", ids, res.Safe)
	}
	// 7 never commits (rolled back); 8 does.
	src.commit(8)
	ids, res = scanIDs(t, s, 3000, 100)
	if !slices.Equal(ids, []string{"tx8"}) || res.Safe.Num != 6 {
		t.Fatalf("third scan %v safe %+v", ids, res.Safe)
	}
	ids, res = scanIDs(t, s, 3000+9999, 100)
	if len(ids) != 0 || res.Safe.Num != 6 {
		t.Fatalf("before settle: %v safe %+v", ids, res.Safe)
	}
	ids, res = scanIDs(t, s, 3000+10_000, 100)
	if len(ids) != 0 || res.Safe.Num != 8 {
		t.Fatalf("after settle: %v safe %+v, want the gap passed", ids, res.Safe)
	}
	// Reset to the persisted cursor: the scanner reads from there again.
	s.Reset(persistence.NoticeCursor{Num: 5})
	ids, _ = scanIDs(t, s, 20_000, 100)
	if !slices.Equal(ids, []string{"tx6", "tx8"}) {
		t.Fatalf("after reset %v", ids)
	}
}

// A full page says More; a gap beyond what a recheck page covered does
// not expire unseen.
func TestScannerPagesAndBoundedRecheck(t *testing.T) {
	src := &fakeSource{}
	s := NewScanner(src, WithSettle(time.Second))
	s.Reset(persistence.NoticeCursor{})
	src.commit(1, 3, 4, 5, 7)
	ids, res := scanIDs(t, s, 0, 2)
	if !slices.Equal(ids, []string{"tx1", "tx3"}) || !res.More || res.Safe.Num != 1 {
		t.Fatalf("page 1 %v %+v", ids, res)
	}
	ids, res = scanIDs(t, s, 0, 2)
	if !slices.Equal(ids, []string{"tx4", "tx5"}) || res.Safe.Num != 1 {
		t.Fatalf("page 2 %v %+v", ids, res)
	}
	ids, res = scanIDs(t, s, 0, 2)
	if !slices.Equal(ids, []string{"tx7"}) || res.More || res.Safe.Num != 1 {
		t.Fatalf("page 3 %v %+v", ids, res)
	}
	// Long after: the recheck of 2 reads rows 3, 4 (its limit), so gap 2
	// expires, gap 6 (not covered) waits for the next scan.
	_, res = scanIDs(t, s, 10_000, 2)
	if res.Safe.Num != 5 {
		t.Fatalf("after settle with a short recheck: safe %+v, want 5 (gap 6 still open)", res.Safe)
	}
	_, res = scanIDs(t, s, 10_000, 2)
	if res.Safe.Num != 7 {
		t.Fatalf("next scan: safe %+v, want 7", res.Safe)
	}
}

// A gap wider than maxGap is not tracked id by id.
func TestScannerWideGapIsPermanent(t *testing.T) {
	src := &fakeSource{}
	s := NewScanner(src)
	s.Reset(persistence.NoticeCursor{})
	src.commit(1, 1+maxGap+5)
	_, res := scanIDs(t, s, 0, 100)
	if res.Safe.Num != 1+maxGap+5 || len(s.missing) != 0 {
		t.Fatalf("safe %+v, %d open gaps", res.Safe, len(s.missing))
	}
}
