package memdb

import (
	"context"
	"errors"
	"testing"

	"github.com/hyapp/roomcell/actors/wallet/wallettest"
	"github.com/hyapp/roomcell/persistence"
)

func TestWalletStoreContract(t *testing.T) {
	wallettest.RunStore(t, func(t *testing.T) persistence.WalletStore {
		s := NewWalletStore()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestClosedWalletStoreIsUnavailable(t *testing.T) {
	s := NewWalletStore()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := s.Accounts(context.Background(), "a", "u")
	if !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("Accounts after Close: got %v, want ErrUnavailable", err)
	}
	_, err = s.Exec(context.Background(), persistence.WalletTx{AppCode: "a", CommandID: "c", Decide: func(persistence.WalletView) (persistence.WalletPlan, error) {
		t.Fatal("Decide ran on a closed store")
		return persistence.WalletPlan{}, nil
	}})
	if !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("Exec after Close: got %v, want ErrUnavailable", err)
	}
}
