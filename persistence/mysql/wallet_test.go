package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/actors/wallet/wallettest"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

func newTestWalletStore(t testing.TB) *WalletStore {
	t.Helper()
	cfg, _ := mysqltest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := OpenWalletStore(ctx, cfg)
	if err != nil {
		t.Fatalf("OpenWalletStore: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestWalletStoreContract(t *testing.T) {
	wallettest.RunStore(t, func(t *testing.T) persistence.WalletStore { return newTestWalletStore(t) })
}

// The CHECK constraint refuses an overdraft even from a writer that skips
// the service (a manual UPDATE, a future bug).
func TestWalletAccountsRefuseNegative(t *testing.T) {
	s := newTestWalletStore(t)
	ctx := t.Context()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO wallet_accounts (app_code, user_id, asset_type, available, frozen, balance_version, created_at_ms, updated_at_ms)
		VALUES ('a', 'u', 'COIN', 5, 0, 1, 0, 0)`); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE wallet_accounts SET available = -1 WHERE app_code = 'a'`); err == nil {
		t.Fatal("the schema accepted a negative balance")
	}
}

func TestOpenWalletStoreHidesPassword(t *testing.T) {
	const pw = "s3cret-wallet-pw"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := OpenWalletStore(ctx, configs.MySQLConfig{DSN: "root:" + pw + "@tcp(127.0.0.1:1)/", DialTimeout: time.Second, QueryTimeout: time.Second})
	if err == nil {
		t.Fatal("OpenWalletStore on a closed port succeeded")
	}
	if strings.Contains(err.Error(), pw) {
		t.Fatalf("error carries the password: %v", err)
	}
	if !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}

// A server that cannot be reached, and a closed store, answer
// ErrUnavailable, which the service turns into wallet.ErrUnavailable (gRPC
// Unavailable).
func TestWalletStoreDownIsUnavailable(t *testing.T) {
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/x?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	closed := newTestWalletStore(t)
	_ = closed.Close()
	for name, s := range map[string]*WalletStore{"unreachable": NewWalletStore(db, time.Second, nil), "closed": closed} {
		svc, err := wallet.NewService(s, configs.DefaultGifts(), configs.WalletConfig{DiamondPercent: 100})
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.DebitGift(t.Context(), wallet.DebitGiftRequest{AppCode: "a", CommandID: "c", RoomID: "r", FromUserID: "u1", ToUserID: "u2", GiftID: "rose", Count: 1})
		if !errors.Is(err, wallet.ErrUnavailable) {
			t.Errorf("%s: DebitGift got %v, want ErrUnavailable", name, err)
		}
		if _, err := svc.GetBalances(t.Context(), "a", "u1"); !errors.Is(err, wallet.ErrUnavailable) {
			t.Errorf("%s: GetBalances got %v, want ErrUnavailable", name, err)
		}
	}
}
