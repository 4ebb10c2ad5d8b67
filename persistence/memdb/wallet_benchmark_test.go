package memdb

import (
	"testing"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/persistence/storetest"
)

// go test ./persistence/memdb -run '^$' -bench WalletDebit
func BenchmarkWalletDebit(b *testing.B) {
	storetest.BenchWalletDebits(b, func(b *testing.B) wallet.Store {
		s := NewWalletStore()
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
