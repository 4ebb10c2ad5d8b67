package backend_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/backend"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

func configsFor(t *testing.T, kind string) configs.Config {
	var cfg configs.Config
	cfg.Store.Kind = kind
	if kind == configs.StoreMySQL {
		cfg.MySQL, _ = mysqltest.NewDatabase(t)
	}
	return cfg
}

// The stores Open returns must be wired to each other the way the notice
// workers rely on: what the room store appends, RoomOutbox reads; what the
// wallet store commits, WalletOutbox reads.
func TestOpenWiresReadersToTheirOwners(t *testing.T) {
	for _, kind := range []string{configs.StoreMemdb, configs.StoreMySQL} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			s, err := backend.Open(ctx, configsFor(t, kind), backend.Want{Wallet: true, Notice: true}, nil)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			if s.Room == nil || s.Wallet == nil || s.Notice == nil || s.WalletOutbox == nil || s.RoomOutbox == nil {
				t.Fatalf("Open with every store wanted left one nil: %+v", s)
			}

			env := persistence.Envelope{EventID: "e1", EventType: "RoomUserKicked", AppCode: "lalu", RoomID: "r1",
				RoomSeq: 1, CommandID: "c1", CreatedAtMs: 1000, Payload: json.RawMessage(`{}`)}
			if err := s.Room.Append(ctx, persistence.Append{Command: persistence.CommandRecord{AppCode: "lalu", RoomID: "r1",
				Seq: 1, CommandID: "c1", CommandType: "KickUser", Reply: []byte(`{}`), Events: []persistence.Envelope{env}, CreatedAtMs: 1000}}); err != nil {
				t.Fatalf("Append: %v", err)
			}
			rows, err := s.RoomOutbox.RoomOutboxAfter(ctx, "RoomUserKicked", 0, "", 10)
			if err != nil || len(rows) != 1 || rows[0].Envelope.EventID != "e1" {
				t.Fatalf("RoomOutbox after an append: %d rows, %v", len(rows), err)
			}

			key := persistence.AccountKey{AppCode: "lalu", UserID: "u1", AssetType: "COIN"}
			if _, err := s.Wallet.Exec(ctx, persistence.WalletTx{AppCode: "lalu", CommandID: "w1", Lock: []persistence.AccountKey{key},
				Decide: func(v persistence.WalletView) (persistence.WalletPlan, error) {
					return creditPlan(v.Accounts[key], 5), nil
				}}); err != nil {
				t.Fatalf("wallet Exec: %v", err)
			}
			recs, err := s.WalletOutbox.ListOutboxAfter(ctx, 0, 10)
			if err != nil || len(recs) != 1 || recs[0].UserID != "u1" {
				t.Fatalf("WalletOutbox after a credit: %d rows, %v", len(recs), err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

// creditPlan adds delta to a fresh account with the ledger entry and
// outbox row CheckWalletPlan demands.
func creditPlan(a persistence.Account, delta int64) persistence.WalletPlan {
	a.Available += delta
	a.BalanceVersion++
	return persistence.WalletPlan{
		NowMs:    1000,
		Record:   persistence.WalletTxRecord{TransactionID: "tx1", AppCode: a.AppCode, CommandID: "w1", Kind: "credit", Result: json.RawMessage(`{}`)},
		Accounts: []persistence.Account{a},
		Ledger: []persistence.LedgerEntry{{TransactionID: "tx1", CommandID: "w1", AppCode: a.AppCode, UserID: a.UserID, AssetType: a.AssetType,
			AvailableDelta: delta, AvailableAfter: a.Available, BalanceVersion: a.BalanceVersion}},
		Outbox: []persistence.WalletOutboxEvent{{EventID: persistence.BalanceEventID("tx1", a.UserID, a.AssetType), AppCode: a.AppCode,
			UserID: a.UserID, EventType: persistence.EventBalanceChanged, Payload: json.RawMessage(`{}`)}},
	}
}

func TestOpenOnlyWhatIsWanted(t *testing.T) {
	s, err := backend.Open(t.Context(), configsFor(t, configs.StoreMemdb), backend.Want{}, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if s.Room == nil || s.Wallet != nil || s.Notice != nil || s.WalletOutbox != nil || s.RoomOutbox != nil {
		t.Fatalf("Open with nothing wanted besides rooms: %+v", s)
	}
	// A notice-only process with a remote wallet has no wallet_outbox to
	// read on go-memdb; the caller must see that as nil, not as an empty
	// source.
	s2, err := backend.Open(t.Context(), configsFor(t, configs.StoreMemdb), backend.Want{Notice: true}, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s2.Close()
	if s2.Notice == nil || s2.RoomOutbox == nil || s2.WalletOutbox != nil || s2.Wallet != nil {
		t.Fatalf("Open notice without wallet on memdb: %+v", s2)
	}
}

func TestOpenRefusesAnUnknownKind(t *testing.T) {
	if s, err := backend.Open(t.Context(), configsFor(t, "cassandra"), backend.Want{Wallet: true}, nil); err == nil {
		_ = s.Close()
		t.Fatal("Open accepted store.kind cassandra")
	}
}
