package grpcapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	grainkind "github.com/hyapp/roomcell/cluster/kind"
	"github.com/hyapp/roomcell/errclass"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/actors/wallet/giftdebit"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

var quiet = slog.New(slog.DiscardHandler)

// serve starts srv on a loopback port and returns a client connection.
func serve(t *testing.T, srv *grpc.Server) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func newWallet(t *testing.T) (*wallet.Service, *memdb.WalletStore) {
	t.Helper()
	store := memdb.NewWalletStore()
	t.Cleanup(func() { _ = store.Close() })
	svc, err := wallet.NewService(store, configs.DefaultGifts(), configs.WalletConfig{DiamondPercent: 100}, wallet.WithLogger(quiet))
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return svc, store
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("%s: got %v (%v), want %v", what, got, err, code)
	}
}

func TestWalletServerStatusCodes(t *testing.T) {
	svc, store := newWallet(t)
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: quiet})
	roomcellv1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(svc, quiet))
	c := roomcellv1.NewWalletServiceClient(serve(t, srv))
	ctx := t.Context()

	cr, err := c.Credit(ctx, &roomcellv1.WalletCreditRequest{CommandId: "top-1", AppCode: "lalu", UserId: "alice", AssetType: "COIN", Amount: 150})
	if err != nil || cr.GetAvailableAfter() != 150 || cr.GetBalanceVersion() != 1 || cr.GetDuplicate() || cr.GetTransactionId() == "" {
		t.Fatalf("Credit: %v %v", cr, err)
	}
	gr, err := c.DebitGift(ctx, &roomcellv1.WalletDebitGiftRequest{CommandId: "g-1", AppCode: "lalu", RoomId: "r1", FromUserId: "alice", ToUserId: "bob", GiftId: "heart", GiftCount: 1})
	if err != nil || gr.GetPriceTotal() != 100 || gr.GetHeatValue() != 100 || gr.GetSenderCoinAfter() != 50 || gr.GetReceiverDiamondAfter() != 100 {
		t.Fatalf("DebitGift: %v %v", gr, err)
	}
	again, err := c.DebitGift(ctx, &roomcellv1.WalletDebitGiftRequest{CommandId: "g-1", AppCode: "lalu", RoomId: "r1", FromUserId: "alice", ToUserId: "bob", GiftId: "heart", GiftCount: 1})
	if err != nil || !again.GetDuplicate() || again.GetTransactionId() != gr.GetTransactionId() || again.GetSenderCoinAfter() != 50 {
		t.Fatalf("repeated DebitGift: %v %v", again, err)
	}

	_, err = c.DebitGift(ctx, &roomcellv1.WalletDebitGiftRequest{CommandId: "g-2", AppCode: "lalu", RoomId: "r1", FromUserId: "alice", ToUserId: "bob", GiftId: "heart", GiftCount: 1})
	wantCode(t, "insufficient", err, codes.FailedPrecondition)
	if !strings.HasPrefix(status.Convert(err).Message(), "insufficient balance") {
		t.Fatalf("insufficient message %q", status.Convert(err).Message())
	}
	_, err = c.DebitGift(ctx, &roomcellv1.WalletDebitGiftRequest{CommandId: "g-3", AppCode: "lalu", RoomId: "r1", FromUserId: "alice", ToUserId: "bob", GiftId: "unicorn", GiftCount: 1})
	wantCode(t, "unknown gift", err, codes.InvalidArgument)
	_, err = c.DebitGift(ctx, &roomcellv1.WalletDebitGiftRequest{CommandId: "g-4", AppCode: "lalu", RoomId: "r1", FromUserId: "alice", ToUserId: "alice", GiftId: "rose", GiftCount: 1})
	wantCode(t, "self gift", err, codes.InvalidArgument)
	_, err = c.DebitGift(ctx, &roomcellv1.WalletDebitGiftRequest{CommandId: "g-1", AppCode: "lalu", RoomId: "r1", FromUserId: "alice", ToUserId: "bob", GiftId: "rose", GiftCount: 1})
	wantCode(t, "command_id reused", err, codes.AlreadyExists)
	_, err = c.Credit(ctx, &roomcellv1.WalletCreditRequest{CommandId: "top-2", AppCode: "lalu", UserId: "alice", AssetType: "GOLD", Amount: 1})
	wantCode(t, "unknown asset", err, codes.InvalidArgument)
	_, err = c.PurchaseVip(ctx, &roomcellv1.WalletPurchaseVipRequest{CommandId: "v-1", AppCode: "lalu", UserId: "alice", Level: 1})
	wantCode(t, "VIP over balance", err, codes.FailedPrecondition)
	vr, err := c.PurchaseVip(ctx, &roomcellv1.WalletPurchaseVipRequest{CommandId: "v-2", AppCode: "lalu", UserId: "alice", Level: 2, Source: "admin_grant"})
	if err != nil || vr.GetAction() != "upgrade" || vr.GetLevel() != 2 || vr.GetPricePaid() != 0 || vr.GetVipName() != "VIP2" {
		t.Fatalf("PurchaseVip grant: %v %v", vr, err)
	}
	_, err = c.PurchaseVip(ctx, &roomcellv1.WalletPurchaseVipRequest{CommandId: "v-3", AppCode: "lalu", UserId: "alice", Level: 1, Source: "admin_grant"})
	wantCode(t, "VIP downgrade", err, codes.FailedPrecondition)

	b, err := c.GetBalances(ctx, &roomcellv1.WalletGetBalancesRequest{AppCode: "lalu", UserId: "alice"})
	if err != nil {
		t.Fatalf("GetBalances: %v", err)
	}
	if len(b.GetAccounts()) != 2 || b.GetAccounts()[0].GetAssetType() != "COIN" || b.GetAccounts()[0].GetAvailable() != 50 ||
		b.GetAccounts()[0].GetBalanceVersion() != 2 || b.GetVip().GetActiveLevel() != 2 {
		t.Fatalf("GetBalances: %v", b)
	}
	_, err = c.GetBalances(ctx, &roomcellv1.WalletGetBalancesRequest{AppCode: "lalu"})
	wantCode(t, "GetBalances without user", err, codes.InvalidArgument)

	// An outage answers Unavailable with the generic text only.
	_ = store.Close()
	_, err = c.GetBalances(ctx, &roomcellv1.WalletGetBalancesRequest{AppCode: "lalu", UserId: "alice"})
	wantCode(t, "closed store", err, codes.Unavailable)
	if strings.Contains(status.Convert(err).Message(), "memdb") {
		t.Fatalf("outage detail leaked to the caller: %q", status.Convert(err).Message())
	}
}

func TestWalletClientKeepsClasses(t *testing.T) {
	svc, store := newWallet(t)
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: quiet})
	roomcellv1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(svc, quiet))
	wc := grpcapi.NewWalletClient(serve(t, srv))
	ctx := t.Context()
	if _, err := svc.Credit(ctx, wallet.CreditRequest{AppCode: "lalu", CommandID: "top", UserID: "alice", AssetType: wallet.AssetCoin, Amount: 10}); err != nil {
		t.Fatalf("Credit: %v", err)
	}
	req := wallet.DebitGiftRequest{AppCode: "lalu", CommandID: "g1", RoomID: "r1", FromUserID: "alice", ToUserID: "bob", GiftID: "rose", Count: 1}
	res, err := wc.DebitGift(ctx, req)
	if err != nil || res.PriceTotal != 10 || res.HeatValue != 10 || res.SenderCoinAfter != 0 || res.Duplicate {
		t.Fatalf("remote DebitGift: %+v %v", res, err)
	}
	res, err = wc.DebitGift(ctx, req)
	if err != nil || !res.Duplicate {
		t.Fatalf("remote repeat: %+v %v", res, err)
	}
	for _, tc := range []struct {
		name string
		mod  func(r *wallet.DebitGiftRequest)
		want error
	}{
		{"insufficient", func(r *wallet.DebitGiftRequest) { r.CommandID = "g2" }, wallet.ErrInsufficientBalance},
		{"unknown gift", func(r *wallet.DebitGiftRequest) { r.CommandID = "g3"; r.GiftID = "nope" }, errclass.Invalid},
		{"reused id", func(r *wallet.DebitGiftRequest) { r.Count = 2 }, wallet.ErrCommandReused},
	} {
		r := req
		tc.mod(&r)
		_, err := wc.DebitGift(ctx, r)
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	_ = store.Close()
	_, err = wc.DebitGift(ctx, wallet.DebitGiftRequest{AppCode: "lalu", CommandID: "g9", RoomID: "r1", FromUserID: "alice", ToUserID: "bob", GiftID: "rose", Count: 1})
	if !errors.Is(err, wallet.ErrUnavailable) {
		t.Fatalf("store down: got %v, want ErrUnavailable", err)
	}
}

type nopPublisher struct{}

func (nopPublisher) PublishRoomEvent(context.Context, persistence.Envelope) error { return nil }

// TestWalletSendGiftEndToEnd runs a room grain in a one-member cluster
// with the in-process wallet, and drives both services over gRPC as a
// client would.
func TestWalletSendGiftEndToEnd(t *testing.T) {
	svc, wstore := newWallet(t)
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	deps := roomgrain.Deps{Store: memdb.New(), Publisher: nopPublisher{}, Gifts: giftdebit.New(svc), Config: cfg.Room, Logger: quiet}
	m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(roomgrain.Kind, roomgrain.GrainProps(deps))}, Logger: quiet})
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(func() { m.Stop(true) })
	readyCtx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := m.WaitReady(readyCtx); err != nil {
		t.Fatalf("cluster ready: %v", err)
	}
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: quiet})
	roomcellv1.RegisterRoomServiceServer(srv, grpcapi.NewRoomServer(&roomgrain.Client{Cluster: m.Cluster}, quiet, 5*time.Second))
	roomcellv1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(svc, quiet))
	conn := serve(t, srv)
	rooms, wallets := roomcellv1.NewRoomServiceClient(conn), roomcellv1.NewWalletServiceClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	if _, err := wallets.Credit(ctx, &roomcellv1.WalletCreditRequest{CommandId: "topup-1", AppCode: "lalu", UserId: "10001", AssetType: "COIN", Amount: 25}); err != nil {
		t.Fatalf("Credit: %v", err)
	}
	if _, err := rooms.CreateRoom(ctx, &roomcellv1.CreateRoomRequest{CommandId: "c1", AppCode: "lalu", RoomId: "r1", UserId: "10001", Name: "party"}); err != nil {
		t.Fatalf("CreateRoom: %v", err)
	}
	if _, err := rooms.JoinRoom(ctx, &roomcellv1.JoinRoomRequest{CommandId: "c2", AppCode: "lalu", RoomId: "r1", UserId: "10002"}); err != nil {
		t.Fatalf("JoinRoom: %v", err)
	}
	gift := &roomcellv1.SendGiftRequest{CommandId: "gift_cmd_001", AppCode: "lalu", RoomId: "r1", UserId: "10001", ToUserId: "10002", GiftId: "rose", GiftCount: 2}
	rep, err := rooms.SendGift(ctx, gift)
	if err != nil {
		t.Fatalf("SendGift: %v", err)
	}
	if rep.GetRoom().GetHeat() != 20 {
		t.Fatalf("room heat after the gift %d, want 20", rep.GetRoom().GetHeat())
	}
	// A retried SendGift charges nothing more.
	again, err := rooms.SendGift(ctx, gift)
	if err != nil || !again.GetDuplicate() {
		t.Fatalf("retried SendGift: %v %v", again, err)
	}
	wantBalance := func(user, asset string, available, version int64) {
		t.Helper()
		b, err := wallets.GetBalances(ctx, &roomcellv1.WalletGetBalancesRequest{AppCode: "lalu", UserId: user})
		if err != nil {
			t.Fatalf("GetBalances %s: %v", user, err)
		}
		for _, a := range b.GetAccounts() {
			if a.GetAssetType() == asset && (a.GetAvailable() != available || a.GetBalanceVersion() != version) {
				t.Fatalf("%s %s: %d v%d, want %d v%d", user, asset, a.GetAvailable(), a.GetBalanceVersion(), available, version)
			}
		}
	}
	// The gift is reserved (v2: 20 COIN frozen), then confirmed after the
	// room's append (v3: the frozen 20 spent, the receiver credited).
	wantBalance("10001", "COIN", 5, 3)
	wantBalance("10002", "DIAMOND", 20, 1)

	rows, err := wstore.ListOutboxAfter(ctx, 0, 100)
	if err != nil {
		t.Fatalf("ListOutboxAfter: %v", err)
	}
	if len(rows) != 4 {
		t.Fatalf("wallet_outbox has %d rows, want 4 (top-up, sender's reserve, sender's and receiver's confirm)", len(rows))
	}
	hold, err := wstore.Transaction(ctx, "lalu", "gift_cmd_001")
	if err != nil {
		t.Fatalf("gift reservation: %v", err)
	}
	h, err := wstore.GiftHold(ctx, "lalu", "gift_cmd_001")
	if err != nil || h.State != "confirmed" {
		t.Fatalf("gift hold: %+v, %v", h, err)
	}
	confirm, err := wstore.Transaction(ctx, "lalu", rowsCommandID(t, rows[2]))
	if err != nil || confirm.TransactionID != h.SettleTransactionID {
		t.Fatalf("gift confirm: %+v, %v", confirm, err)
	}
	meta := func(reason, other string) map[string]string {
		return map[string]string{"reason": reason, "room_id": "r1", "gift_id": "rose", "gift_count": "2",
			"counterparty_user_id": other, "gift_command_id": "gift_cmd_001"}
	}
	wants := []wallet.BalanceChanged{
		{TransactionID: hold.TransactionID, CommandID: "gift_cmd_001", UserID: "10001", AssetType: "COIN",
			AvailableDelta: -20, FrozenDelta: 20, AvailableAfter: 5, FrozenAfter: 20, BalanceVersion: 2, Metadata: meta("gift_hold", "10002")},
		{TransactionID: confirm.TransactionID, CommandID: confirm.CommandID, UserID: "10001", AssetType: "COIN",
			FrozenDelta: -20, AvailableAfter: 5, BalanceVersion: 3, Metadata: meta("gift_send", "10002")},
		{TransactionID: confirm.TransactionID, CommandID: confirm.CommandID, UserID: "10002", AssetType: "DIAMOND",
			AvailableDelta: 20, AvailableAfter: 20, BalanceVersion: 1, Metadata: meta("gift_receive", "10001")},
	}
	for i, row := range rows[1:] {
		var p wallet.BalanceChanged
		if err := json.Unmarshal(row.Payload, &p); err != nil {
			t.Fatalf("payload: %v", err)
		}
		want := wants[i]
		want.EventType, want.AppCode = "WalletBalanceChanged", "lalu"
		want.EventID = want.TransactionID + ":WalletBalanceChanged:" + want.UserID + ":" + want.AssetType
		want.CreatedAtMs, want.SourceCreatedAtMs = p.CreatedAtMs, p.SourceCreatedAtMs
		if !reflect.DeepEqual(p, want) || row.EventID != want.EventID || row.UserID != want.UserID || p.CreatedAtMs <= 0 {
			t.Fatalf("gift event %s:\n got %+v\nwant %+v", row.EventID, p, want)
		}
	}

	// Insufficient funds: FailedPrecondition, and neither the room nor the
	// wallet changes.
	before, err := rooms.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "lalu", RoomId: "r1"})
	if err != nil {
		t.Fatalf("GetRoom: %v", err)
	}
	_, err = rooms.SendGift(ctx, &roomcellv1.SendGiftRequest{CommandId: "gift_cmd_002", AppCode: "lalu", RoomId: "r1", UserId: "10001", ToUserId: "10002", GiftId: "heart", GiftCount: 1})
	wantCode(t, "SendGift over balance", err, codes.FailedPrecondition)
	after, err := rooms.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "lalu", RoomId: "r1"})
	if err != nil {
		t.Fatalf("GetRoom: %v", err)
	}
	if after.GetRoom().GetSeq() != before.GetRoom().GetSeq() || after.GetRoom().GetHeat() != 20 {
		t.Fatalf("refused gift changed the room: seq %d -> %d, heat %d", before.GetRoom().GetSeq(), after.GetRoom().GetSeq(), after.GetRoom().GetHeat())
	}
	wantBalance("10001", "COIN", 5, 3)
	wantBalance("10002", "DIAMOND", 20, 1)
	if rows, _ := wstore.ListOutboxAfter(ctx, 0, 100); len(rows) != 4 {
		t.Fatalf("refused gift wrote wallet_outbox rows: %d, want 4", len(rows))
	}
	if _, err := wstore.Transaction(ctx, "lalu", "gift_cmd_002"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("refused gift recorded a wallet transaction: %v", err)
	}
}

// rowsCommandID is the command_id in a wallet_outbox row's payload.
func rowsCommandID(t *testing.T, row persistence.WalletOutboxRecord) string {
	t.Helper()
	var p wallet.BalanceChanged
	if err := json.Unmarshal(row.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.CommandID
}
