package main

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

func outboxAll() persistence.OutboxFilter { return persistence.OutboxFilter{} }

func walletClient(t testing.TB, app *App) v1.WalletServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return v1.NewWalletServiceClient(conn)
}

// coin returns the available COIN of a balances reply.
func coin(b *v1.WalletGetBalancesReply) int64 {
	for _, a := range b.GetAccounts() {
		if a.GetAssetType() == "COIN" {
			return a.GetAvailable()
		}
	}
	return 0
}
