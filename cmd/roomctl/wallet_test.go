package main

import (
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// startWalletTestServer serves a real WalletServer on an in-memory wallet,
// with the server options of o (tokens, TLS) when given.
func startWalletTestServer(t *testing.T, o ...grpcapi.Options) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	svc, err := wallet.NewService(memdb.NewWalletStore(), configs.DefaultGifts(), configs.WalletConfig{DiamondPercent: 100}, wallet.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	opts := grpcapi.Options{}
	if len(o) > 0 {
		opts = o[0]
	}
	opts.Logger = log
	srv, _ := grpcapi.NewServer(opts)
	roomcellv1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(svc, log))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestRoomctlWallet(t *testing.T) {
	addr := startWalletTestServer(t)
	mustRun := ctlMust(t, addr)
	out := mustRun("wallet", "credit", "--app", "lalu", "--user", "u1", "--amount", "5000", "--command-id", "grant-1")
	if !strings.Contains(out, "credited 5000 COIN to lalu/u1  command_id grant-1") || !strings.Contains(out, "available 5000  balance_version 1") {
		t.Fatalf("credit output:\n%s", out)
	}
	out = mustRun("wallet", "credit", "--app", "lalu", "--user", "u1", "--amount", "5000", "--command-id", "grant-1")
	if !strings.Contains(out, "duplicate") || !strings.Contains(out, "available 5000  balance_version 1") {
		t.Fatalf("repeated credit output:\n%s", out)
	}
	out = mustRun("wallet", "vip", "--app", "lalu", "--user", "u1", "--level", "2", "--source", "vip_purchase", "--command-id", "vip-1")
	if !strings.Contains(out, "upgrade lalu/u1 VIP0 -> VIP2") || !strings.Contains(out, "paid 3000 COIN  coin_after 2000") {
		t.Fatalf("vip output:\n%s", out)
	}
	out = mustRun("--json", "wallet", "balance", "--app", "lalu", "--user", "u1")
	var b struct {
		Accounts []struct {
			AssetType      string `json:"asset_type"`
			Available      string `json:"available"` // protojson writes int64 as a string
			BalanceVersion string `json:"balance_version"`
		} `json:"accounts"`
		Vip struct {
			ActiveLevel int `json:"active_level"`
		} `json:"vip"`
	}
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("balance --json: %v\n%s", err, out)
	}
	if len(b.Accounts) != 2 || b.Accounts[0].AssetType != "COIN" || b.Accounts[0].Available != "2000" ||
		b.Accounts[0].BalanceVersion != "2" || b.Vip.ActiveLevel != 2 {
		t.Fatalf("balance --json: %+v", b)
	}
	out = mustRun("wallet", "balance", "--app", "lalu", "--user", "u1")
	if !strings.Contains(out, "COIN     available 2000  frozen 0  balance_version 2") || !strings.Contains(out, "VIP      level 2") {
		t.Fatalf("balance output:\n%s", out)
	}

	code, _, errOut := runCtl(t, addr, "wallet", "credit", "--app", "lalu", "--user", "u1", "--asset", "GOLD", "--amount", "1")
	if code != 1 || !strings.Contains(errOut, "InvalidArgument") {
		t.Fatalf("bad asset: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCtl(t, addr, "wallet", "vip", "--app", "lalu", "--user", "u1", "--level", "6", "--source", "vip_purchase")
	if code != 1 || !strings.Contains(errOut, "FailedPrecondition") {
		t.Fatalf("VIP over balance: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCtl(t, addr, "wallet", "credit", "--app", "lalu", "--user", "u1")
	if code != 2 || !strings.Contains(errOut, "--amount is required") {
		t.Fatalf("missing amount: exit %d, stderr %q", code, errOut)
	}
}

// ctlMust runs roomctl against addr and fails the test on a non-zero exit.
func ctlMust(t *testing.T, addr string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		code, out, errOut := runCtl(t, addr, args...)
		if code != 0 {
			t.Fatalf("roomctl %v: exit %d, stderr %q", args, code, errOut)
		}
		return out
	}
}
