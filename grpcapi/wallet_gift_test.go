package grpcapi_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/grpcapi"
)

// The reserve → confirm / refund RPCs keep the in-process wallet's
// idempotency and classes across the wire: a repeat answers the recorded
// result, a reused command_id with another request is ErrConflict, a
// gift settles once, and money only moves as the in-process wallet moves
// it.
func TestWalletClientGiftHoldSettle(t *testing.T) {
	svc, store := newWallet(t)
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: quiet})
	roomcellv1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(svc, quiet))
	conn := serve(t, srv)
	wc, raw := grpcapi.NewWalletClient(conn), roomcellv1.NewWalletServiceClient(conn)
	ctx := t.Context()
	if _, err := svc.Credit(ctx, wallet.CreditRequest{AppCode: "lalu", CommandID: "top", UserID: "alice", AssetType: wallet.AssetCoin, Amount: 30}); err != nil {
		t.Fatal(err)
	}
	gift := func(id string) wallet.DebitGiftRequest {
		return wallet.DebitGiftRequest{AppCode: "lalu", CommandID: id, RoomID: "r1", FromUserID: "alice", ToUserID: "bob", GiftID: "rose", Count: 1}
	}
	h1, err := wc.HoldGift(ctx, gift("g1"))
	if err != nil || h1.PriceTotal != 10 || h1.HeatValue != 10 || h1.SenderCoinAfter != 20 || h1.Duplicate {
		t.Fatalf("HoldGift: %+v %v", h1, err)
	}
	if again, err := wc.HoldGift(ctx, gift("g1")); err != nil || !again.Duplicate || again.TransactionID != h1.TransactionID {
		t.Fatalf("repeated HoldGift: %+v %v", again, err)
	}
	other := gift("g1")
	other.Count = 2
	if _, err := wc.HoldGift(ctx, other); !errors.Is(err, wallet.ErrCommandReused) {
		t.Fatalf("HoldGift reusing g1 for 2 roses: %v, want ErrConflict", err)
	}
	c1, err := wc.ConfirmGift(ctx, "lalu", "g1")
	if err != nil || c1.State != "confirmed" || c1.TransactionID == "" {
		t.Fatalf("ConfirmGift: %+v %v", c1, err)
	}
	if again, err := wc.ConfirmGift(ctx, "lalu", "g1"); err != nil || again != c1 {
		t.Fatalf("repeated ConfirmGift: %+v %v, want %+v", again, err, c1)
	}
	if _, err := wc.RefundGift(ctx, "lalu", "g1"); !errors.Is(err, errclass.Precondition) || errors.Is(err, wallet.ErrInsufficientBalance) {
		t.Fatalf("RefundGift of a confirmed gift: %v, want ErrPrecondition", err)
	}

	if _, err := wc.HoldGift(ctx, gift("g2")); err != nil {
		t.Fatal(err)
	}
	r2, err := wc.RefundGift(ctx, "lalu", "g2")
	if err != nil || r2.State != "refunded" {
		t.Fatalf("RefundGift: %+v %v", r2, err)
	}
	if again, err := wc.RefundGift(ctx, "lalu", "g2"); err != nil || again != r2 {
		t.Fatalf("repeated RefundGift: %+v %v, want %+v", again, err, r2)
	}
	if _, err := wc.ConfirmGift(ctx, "lalu", "g2"); !errors.Is(err, errclass.Precondition) {
		t.Fatalf("ConfirmGift of a refunded gift: %v", err)
	}
	if _, err := wc.HoldGift(ctx, gift("g2")); !errors.Is(err, errclass.Precondition) || !strings.Contains(err.Error(), "not delivered") {
		t.Fatalf("HoldGift of a refunded gift: %v, want the refunded precondition", err)
	}
	if _, err := wc.ConfirmGift(ctx, "lalu", "never"); !errors.Is(err, errclass.Precondition) {
		t.Fatalf("ConfirmGift without a reservation: %v", err)
	}
	if _, err := wc.HoldGift(ctx, gift("g3")); err != nil {
		t.Fatal(err)
	}
	heart := gift("g4")
	heart.GiftID = "heart"
	if _, err := wc.HoldGift(ctx, heart); !errors.Is(err, wallet.ErrInsufficientBalance) {
		t.Fatalf("HoldGift over balance: %v, want ErrInsufficientBalance", err)
	}

	// Bad input is InvalidArgument and changes nothing.
	if _, err := wc.ConfirmGift(ctx, "", "g3"); !errors.Is(err, errclass.Invalid) {
		t.Fatalf("ConfirmGift without app_code: %v", err)
	}
	if _, err := wc.RefundGift(ctx, "lalu", "bad\x00id"); !errors.Is(err, errclass.Invalid) {
		t.Fatalf("RefundGift with a NUL command_id: %v", err)
	}
	for _, lim := range []int32{0, -1, 1001} {
		_, err := raw.ListOpenGiftHolds(ctx, &roomcellv1.WalletListOpenGiftHoldsRequest{BeforeMs: 1 << 60, Limit: lim})
		wantCode(t, "ListOpenGiftHolds limit", err, codes.InvalidArgument)
	}

	hs, err := wc.OpenGiftHolds(ctx, 1<<60, 10)
	if err != nil || len(hs) != 1 || hs[0].CommandID != "g3" || hs[0].PriceTotal != 10 || hs[0].RoomID != "r1" || hs[0].State != "open" {
		t.Fatalf("OpenGiftHolds: %+v %v", hs, err)
	}
	if hs, err := wc.OpenGiftHolds(ctx, hs[0].CreatedAtMs, 10); err != nil || len(hs) != 0 {
		t.Fatalf("OpenGiftHolds before the oldest: %+v %v", hs, err)
	}
	st, err := wc.GiftHoldStats(ctx)
	if err != nil || st.Open != 1 || st.OldestCreatedAtMs != hs[0].CreatedAtMs {
		t.Fatalf("GiftHoldStats: %+v %v", st, err)
	}

	// Money: 30 credited = alice's 10 available + 10 frozen (g3) + the 10
	// bob got for g1; the refunded g2 moved nothing in the end.
	a, err := svc.GetBalances(ctx, "lalu", "alice")
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.GetBalances(ctx, "lalu", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if a.Accounts[0].Available != 10 || a.Accounts[0].Frozen != 10 || b.Accounts[1].Available != 10 {
		t.Fatalf("alice %+v, bob %+v", a.Accounts, b.Accounts)
	}

	_ = store.Close()
	if _, err := wc.RefundGift(ctx, "lalu", "g3"); !errors.Is(err, wallet.ErrUnavailable) {
		t.Fatalf("RefundGift with the store down: %v, want ErrUnavailable", err)
	}
}

// A room node whose wallet.auth_token is refused (a client token, or
// none) gets a clear retryable error naming the setting, not Internal.
func TestWalletClientRefusedCredential(t *testing.T) {
	svc, _ := newWallet(t)
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: quiet, ClientTokens: []string{"client-tok"}, OperatorTokens: []string{"op-tok"}})
	roomcellv1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(svc, quiet))
	addr := serve(t, srv).Target()
	for _, tok := range []string{"client-tok", "", "op-tok"} {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if tok != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(grpcapi.BearerToken(tok)))
		}
		conn, err := grpc.NewClient(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		_, err = grpcapi.NewWalletClient(conn).RefundGift(t.Context(), "lalu", "g1")
		if tok == "op-tok" {
			if err != nil {
				t.Fatalf("operator token: %v", err)
			}
			continue
		}
		if !errors.Is(err, wallet.ErrUnavailable) || !strings.Contains(err.Error(), "wallet.auth_token") || status.Code(err) == codes.Internal {
			t.Fatalf("token %q: %v, want ErrUnavailable naming wallet.auth_token", tok, err)
		}
	}
}

// The reconciler on a room node parks over the wire: the park reaches the
// store (so every node's scan leaves the reservation out), a second park
// reports false, a gift never reserved is ErrGiftNotReserved, and the
// counts and the parked row's fields come back through the client.
func TestWalletClientParkGift(t *testing.T) {
	svc, store := newWallet(t)
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: quiet})
	roomcellv1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(svc, quiet))
	wc := grpcapi.NewWalletClient(serve(t, srv))
	ctx := t.Context()
	if _, err := svc.Credit(ctx, wallet.CreditRequest{AppCode: "lalu", CommandID: "top", UserID: "alice", AssetType: wallet.AssetCoin, Amount: 30}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"stuck", "fine"} {
		if _, err := wc.HoldGift(ctx, wallet.DebitGiftRequest{AppCode: "lalu", CommandID: id, RoomID: "r1", FromUserID: "alice", ToUserID: "bob", GiftID: "rose", Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []bool{true, false} {
		if parked, err := wc.ParkGift(ctx, "lalu", "stuck", strings.Repeat("x", 600)); err != nil || parked != want {
			t.Fatalf("park #%d: %v, %v; want %v", i+1, parked, err, want)
		}
	}
	if _, err := wc.ParkGift(ctx, "lalu", "never", "x"); !errors.Is(err, wallet.ErrGiftNotReserved) {
		t.Fatalf("park of a gift never reserved: %v, want ErrGiftNotReserved", err)
	}
	open, err := wc.OpenGiftHolds(ctx, 1<<62, 10)
	if err != nil || len(open) != 1 || open[0].CommandID != "fine" {
		t.Fatalf("the scan over the wire: %+v, %v; want only the unparked one", open, err)
	}
	st, err := wc.GiftHoldStats(ctx)
	if err != nil || st.Open != 2 || st.Parked != 1 {
		t.Fatalf("stats over the wire: %+v, %v; want 2 open, 1 parked", st, err)
	}
	h, err := store.GiftHold(ctx, "lalu", "stuck")
	if err != nil || h.ParkedAtMs == 0 || len(h.ParkReason) != 512 {
		t.Fatalf("stored park: at %d, reason of %d bytes, %v; want set, cut to 512", h.ParkedAtMs, len(h.ParkReason), err)
	}
}
