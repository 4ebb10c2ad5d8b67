package main

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// An operator lists a stuck reservation and ends it either way; the
// other way is then refused, and the sender's COIN is free again.
func TestRoomctlWalletHold(t *testing.T) {
	addr := startWalletTestServer(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustRun := ctlMust(t, addr)
	mustRun("wallet", "credit", "--app", "lalu", "--user", "u1", "--amount", "500", "--command-id", "grant-1")
	wc := roomcellv1.NewWalletServiceClient(conn)
	for _, id := range []string{"gift-1", "gift-2"} {
		if _, err := wc.HoldGift(t.Context(), &roomcellv1.WalletDebitGiftRequest{CommandId: id, AppCode: "lalu", RoomId: "r1",
			FromUserId: "u1", ToUserId: "u2", GiftId: "rose", GiftCount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	out := mustRun("wallet", "hold", "list", "--older-than", "0s")
	if !strings.Contains(out, "open reservations 2") || !strings.Contains(out, "lalu/gift-1  room r1  u1 -> u2  1×rose  price 10") {
		t.Fatalf("hold list:\n%s", out)
	}
	if out := mustRun("wallet", "hold", "refund", "--app", "lalu", "--command-id", "gift-1"); !strings.Contains(out, "gift lalu/gift-1 refunded") {
		t.Fatalf("refund:\n%s", out)
	}
	if out := mustRun("wallet", "hold", "confirm", "--app", "lalu", "--command-id", "gift-2"); !strings.Contains(out, "gift lalu/gift-2 confirmed") {
		t.Fatalf("confirm:\n%s", out)
	}
	if code, _, errOut := runCtl(t, addr, "wallet", "hold", "confirm", "--app", "lalu", "--command-id", "gift-1"); code == 0 || !strings.Contains(errOut, "FailedPrecondition") {
		t.Fatalf("confirm after refund: exit %d, stderr %q", code, errOut)
	}
	out = mustRun("wallet", "balance", "--app", "lalu", "--user", "u1")
	if !strings.Contains(out, "COIN     available 490  frozen 0") {
		t.Fatalf("sender after one refund and one confirm:\n%s", out)
	}
	if out := mustRun("wallet", "hold", "list", "--older-than", "0s"); !strings.Contains(out, "open reservations 0") {
		t.Fatalf("hold list after both ended:\n%s", out)
	}
}

// walletNodes starts n wallet servers over one store, as n nodes share
// the wallet database.
func walletNodes(t *testing.T, store persistence.WalletStore, n int) []string {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	var addrs []string
	for range n {
		svc, err := wallet.NewService(store, configs.DefaultGifts(), configs.WalletConfig{DiamondPercent: 100}, wallet.WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: log})
		roomcellv1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(svc, log))
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		addrs = append(addrs, lis.Addr().String())
	}
	return addrs
}

// A reservation parked through one node (its reconciler's remote park) is
// listed and resolved from another: the park lives with the reservation.
// It leaves the ordinary list (the reconciler's scan); the resolve works
// once, again is idempotent, the other way is refused, and the sender's
// COIN is whole again.
func TestRoomctlParkedHoldResolvedFromAnyNode(t *testing.T) {
	store := memdb.NewWalletStore()
	nodes := walletNodes(t, store, 2)
	a, b := ctlMust(t, nodes[0]), ctlMust(t, nodes[1])
	a("wallet", "credit", "--app", "lalu", "--user", "u1", "--amount", "500", "--command-id", "grant-1")
	conn, err := grpc.NewClient(nodes[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wc := roomcellv1.NewWalletServiceClient(conn)
	for _, id := range []string{"stuck", "normal"} {
		if _, err := wc.HoldGift(t.Context(), &roomcellv1.WalletDebitGiftRequest{CommandId: id, AppCode: "lalu", RoomId: "r1",
			FromUserId: "u1", ToUserId: "u2", GiftId: "rose", GiftCount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []bool{true, false} {
		r, err := wc.ParkGiftHold(t.Context(), &roomcellv1.WalletParkGiftHoldRequest{AppCode: "lalu", CommandId: "stuck", Reason: "confirm overflows"})
		if err != nil || r.GetParked() != want {
			t.Fatalf("park #%d: %v, %v; want parked=%v", i+1, r, err, want)
		}
	}
	if _, err := wc.ParkGiftHold(t.Context(), &roomcellv1.WalletParkGiftHoldRequest{AppCode: "lalu", CommandId: "never-held", Reason: "x"}); err == nil {
		t.Fatal("parking a gift with no reservation succeeded")
	}
	out := b("wallet", "hold", "list", "--older-than", "0s")
	if !strings.Contains(out, "open reservations 2  parked 1") || strings.Contains(out, "lalu/stuck") || !strings.Contains(out, "lalu/normal") {
		t.Fatalf("the ordinary list (the reconciler's scan) on the other node:\n%s", out)
	}
	out = b("wallet", "hold", "list", "--parked")
	if !strings.Contains(out, "lalu/stuck") || !strings.Contains(out, `reason "confirm overflows"`) || strings.Contains(out, "lalu/normal") {
		t.Fatalf("the parked list on the other node:\n%s", out)
	}
	first := b("wallet", "hold", "refund", "--app", "lalu", "--command-id", "stuck")
	if !strings.Contains(first, "gift lalu/stuck refunded") {
		t.Fatalf("refund:\n%s", first)
	}
	if again := a("wallet", "hold", "refund", "--app", "lalu", "--command-id", "stuck"); again != first {
		t.Fatalf("the same refund again on the first node: %q, want the first reply %q", again, first)
	}
	if code, _, errOut := runCtl(t, nodes[0], "wallet", "hold", "confirm", "--app", "lalu", "--command-id", "stuck"); code == 0 || !strings.Contains(errOut, "FailedPrecondition") {
		t.Fatalf("confirm after refund: exit %d, stderr %q", code, errOut)
	}
	if out := a("wallet", "hold", "list", "--parked"); !strings.Contains(out, "parked 0") || strings.Contains(out, "lalu/stuck") {
		t.Fatalf("parked list after the resolve:\n%s", out)
	}
	// The park never touched the money: 500 - 10 held by "normal".
	if out := a("wallet", "balance", "--app", "lalu", "--user", "u1"); !strings.Contains(out, "COIN     available 490  frozen 10") {
		t.Fatalf("sender after the parked gift's refund:\n%s", out)
	}
}
