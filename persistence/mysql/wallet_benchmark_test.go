package mysql

import (
	"testing"

	"github.com/hyapp/roomcell/actors/wallet/wallettest"
	"github.com/hyapp/roomcell/persistence"
)

// go test ./persistence/mysql -run '^$' -bench WalletDebit -benchtime 2000x
func BenchmarkWalletDebit(b *testing.B) {
	wallettest.BenchDebits(b, func(b *testing.B) persistence.WalletStore { return newTestWalletStore(b) })
}
