package memdb

import (
	"testing"

	"github.com/hyapp/roomcell/actors/wallet/wallettest"
	"github.com/hyapp/roomcell/persistence"
)

// go test ./persistence/memdb -run '^$' -bench WalletDebit
func BenchmarkWalletDebit(b *testing.B) {
	wallettest.BenchDebits(b, func(b *testing.B) persistence.WalletStore {
		s := NewWalletStore()
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
