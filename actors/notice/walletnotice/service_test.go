package walletnotice_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/notice/noticeapp"
	"github.com/hyapp/roomcell/actors/notice/noticetest"
	"github.com/hyapp/roomcell/actors/notice/roomnotice"
	"github.com/hyapp/roomcell/actors/notice/walletnotice"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// The embedded (dev) setup end to end: wallet transactions on go-memdb
// become C2C wallet_notice and vip_notice messages at the fake IM, to the
// right users, with the seed's payloads, and the metrics count them.
func TestWalletChangesReachUsersAsNotices(t *testing.T) {
	ctx := context.Background()
	ws := memdb.NewWalletStore()
	t.Cleanup(func() { _ = ws.Close() })
	svc, err := wallet.NewService(ws, configs.DefaultGifts(), configs.WalletConfig{}, wallet.WithLogger(noticetest.Quiet))
	if err != nil {
		t.Fatal(err)
	}
	fake, pub := noticetest.FakeIM(t)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return noticetest.Quiet }))
	t.Cleanup(sys.Shutdown)
	sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics, err := notice.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	store := memdb.NewNoticeStore()
	t.Cleanup(func() { _ = store.Close() })
	var cfg configs.NoticeConfig
	cfg.WalletNoticeWorker = configs.WithDefaults(configs.NoticeWorkerConfig{Enabled: true, PollInterval: 20 * time.Millisecond})
	app, err := noticeapp.Start(sup, noticeapp.Deps{Config: cfg, Store: store, Modules: []noticeapp.Module{walletnotice.App(ws), roomnotice.App(nil)}, Publisher: pub, NodeID: "dev",
		Logger: noticetest.Quiet, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Stop(10 * time.Second) })

	for i, amount := range []int64{5000, 100_000} {
		if _, err := svc.Credit(ctx, wallet.CreditRequest{AppCode: "lalu", CommandID: "topup-" + string(rune('a'+i)), UserID: "10001",
			AssetType: wallet.AssetCoin, Amount: amount}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.PurchaseVip(ctx, wallet.PurchaseVipRequest{AppCode: "lalu", CommandID: "vip-1", UserID: "10001", Level: 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		wallets, vips := 0, 0
		for _, m := range fake.C2CMessages("10001") {
			switch m.Ext {
			case walletnotice.ExtWalletNotice:
				wallets++
			case walletnotice.ExtVipNotice:
				vips++
			}
		}
		if wallets == 3 && vips == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("user got %d wallet_notice and %d vip_notice, want 3 (two top-ups, the VIP debit) and 1", wallets, vips)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var versions []int64
	// The client of docs/client-protocol.md: keep the newest
	// balance_version, drop a notice that is not newer.
	var held, heldAvailable int64
	for _, m := range fake.C2CMessages("10001") {
		switch m.Ext {
		case walletnotice.ExtWalletNotice:
			var p wallet.BalanceChanged
			if err := json.Unmarshal([]byte(m.Data), &p); err != nil {
				t.Fatal(err)
			}
			if p.UserID != "10001" || p.AssetType != wallet.AssetCoin || m.EventIDs[0] != p.EventID {
				t.Fatalf("wallet_notice %+v", p)
			}
			versions = append(versions, p.BalanceVersion)
			if p.BalanceVersion > held {
				held, heldAvailable = p.BalanceVersion, p.AvailableAfter
			}
		case walletnotice.ExtVipNotice:
			var p wallet.VipActivated
			if err := json.Unmarshal([]byte(m.Data), &p); err != nil {
				t.Fatal(err)
			}
			if p.Level != 1 || p.Source != wallet.SourceVipPurchase || p.Action != wallet.ActionUpgrade || m.EventIDs[0] != p.EventID {
				t.Fatalf("vip_notice %+v", p)
			}
		}
	}
	// Notices of one user may arrive out of order (claims are ordered by
	// due time); the client rule still ends at the true balance.
	if got := slices.Sorted(slices.Values(versions)); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("balance versions %v, want each of 1, 2, 3 once", versions)
	}
	bal, err := svc.GetBalances(ctx, "lalu", "10001")
	if err != nil {
		t.Fatal(err)
	}
	var coin int64 = -1
	for _, a := range bal.Accounts {
		if a.AssetType == wallet.AssetCoin {
			coin = a.Available
		}
	}
	if held != 3 || heldAvailable != coin {
		t.Fatalf("client holds version %d with %d COIN after %v; the wallet says %+v", held, heldAvailable, versions, bal)
	}
	value := func(c prometheus.Metric) *dto.Metric {
		var m dto.Metric
		if err := c.Write(&m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	// IM has the messages before the worker records them delivered.
	for wait := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := value(metrics.Delivered.WithLabelValues(persistence.SourceWalletOutbox)).GetCounter().GetValue()
		if got == 4 {
			break
		}
		if got > 4 || time.Now().After(wait) {
			t.Fatalf("roomcell_notice_delivered_total = %v, want 4", got)
		}
	}
	if got := value(metrics.Ingested.WithLabelValues(persistence.SourceWalletOutbox, persistence.IngressPoll)).GetCounter().GetValue(); got != 4 {
		t.Fatalf("roomcell_notice_ingested_total = %v, want 4", got)
	}
	lag := value(metrics.DeliveryLag.WithLabelValues(persistence.SourceWalletOutbox).(prometheus.Metric)).GetHistogram()
	if lag.GetSampleCount() != 4 {
		t.Fatalf("delivery latency histogram has %d samples, want 4", lag.GetSampleCount())
	}
}
