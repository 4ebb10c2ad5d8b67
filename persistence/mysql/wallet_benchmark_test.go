package mysql

import (
	"testing"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/persistence/storetest"
)

// go test ./persistence/mysql -run '^$' -bench WalletDebit -benchtime 2000x
func BenchmarkWalletDebit(b *testing.B) {
	storetest.BenchWalletDebits(b, func(b *testing.B) wallet.Store { return newTestWalletStore(b) })
}
