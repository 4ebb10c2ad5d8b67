package main

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hyapp/roomcell/api/roomcellv1"
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
