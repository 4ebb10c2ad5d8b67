package memdb

import (
	"context"
	"errors"
	"testing"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func TestWalletStoreContract(t *testing.T) {
	storetest.RunWalletStore(t, func(t *testing.T) wallet.Store {
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
	_, err = s.Exec(context.Background(), wallet.Tx{AppCode: "a", CommandID: "c", Decide: func(wallet.View) (wallet.Plan, error) {
		t.Fatal("Decide ran on a closed store")
		return wallet.Plan{}, nil
	}})
	if !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("Exec after Close: got %v, want ErrUnavailable", err)
	}
}
