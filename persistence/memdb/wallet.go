package memdb

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/persistence"
)

// WalletStore is the go-memdb wallet store (dev mode, fast tests). go-memdb
// has one writer at a time, so Exec is trivially serialisable: the lock of
// every account is the MemDB's writer lock. It has its own MemDB; the zero
// value is not usable, call NewWalletStore.
type WalletStore struct {
	db     *memdb.MemDB
	closed atomic.Bool
}

var _ wallet.Store = (*WalletStore)(nil)

// NewWalletStore returns an empty wallet store.
func NewWalletStore() *WalletStore {
	db, err := memdb.NewMemDB(walletSchema())
	if err != nil {
		// The schema is a constant of this package: failing is a bug.
		panic(fmt.Sprintf("memdb: wallet schema: %v", err))
	}
	return &WalletStore{db: db}
}

// Close makes every later call fail with ErrUnavailable, as a closed MySQL
// pool would.
func (s *WalletStore) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *WalletStore) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("memdb: wallet store closed: %w", persistence.ErrUnavailable)
	}
	return nil
}

// Exec implements wallet.Store.
func (s *WalletStore) Exec(ctx context.Context, tx wallet.Tx) (wallet.Receipt, error) {
	if err := s.ready(ctx); err != nil {
		return wallet.Receipt{}, err
	}
	if tx.AppCode == "" || tx.CommandID == "" || tx.Decide == nil {
		// go-memdb cannot index empty strings: refuse rather than slip
		// past the idempotency index.
		return wallet.Receipt{}, fmt.Errorf("memdb: wallet tx needs app_code, command_id and Decide")
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	if rec, err := findWalletTx(txn, tx.AppCode, tx.CommandID); err == nil {
		return wallet.Receipt{Record: rec, Duplicate: true}, nil
	} else if err != persistence.ErrNotFound {
		return wallet.Receipt{}, err
	}
	view := wallet.View{Accounts: map[wallet.AccountKey]wallet.Account{}}
	for _, k := range wallet.SortedLocks(tx.Lock) {
		a, err := getAccount(txn, k)
		if err != nil {
			return wallet.Receipt{}, err
		}
		view.Accounts[k] = a
	}
	if tx.LockVip != "" {
		v, err := getVip(txn, tx.AppCode, tx.LockVip)
		if err != nil && err != persistence.ErrNotFound {
			return wallet.Receipt{}, err
		}
		if err != nil {
			v = wallet.Vip{AppCode: tx.AppCode, UserID: tx.LockVip}
		}
		view.Vip = v
	}
	plan, err := tx.Decide(view)
	if err != nil {
		return wallet.Receipt{}, err
	}
	if err := wallet.CheckPlan(tx, view, plan); err != nil {
		return wallet.Receipt{}, err
	}
	rec := plan.Record
	rec.Result = slices.Clone(rec.Result)
	if err := txn.Insert(tableWalletTransactions, &rec); err != nil {
		return wallet.Receipt{}, fmt.Errorf("memdb: insert wallet transaction: %w", err)
	}
	for _, a := range plan.Accounts {
		a := a
		if err := txn.Insert(tableWalletAccounts, &a); err != nil {
			return wallet.Receipt{}, fmt.Errorf("memdb: write account: %w", err)
		}
	}
	for _, e := range plan.Ledger {
		e := e
		if err := txn.Insert(tableWalletLedger, &e); err != nil {
			return wallet.Receipt{}, fmt.Errorf("memdb: write ledger: %w", err)
		}
	}
	if plan.Vip != nil {
		v := *plan.Vip
		if err := txn.Insert(tableWalletVip, &v); err != nil {
			return wallet.Receipt{}, fmt.Errorf("memdb: write vip: %w", err)
		}
	}
	if plan.Hold != nil {
		h := *plan.Hold
		if err := txn.Insert(tableWalletGiftHolds, &h); err != nil {
			return wallet.Receipt{}, fmt.Errorf("memdb: write gift hold: %w", err)
		}
	}
	next, err := nextOutboxID(txn)
	if err != nil {
		return wallet.Receipt{}, err
	}
	for _, o := range plan.Outbox {
		if existing, err := txn.First(tableWalletOutbox, indexWalletEventID, o.EventID); err != nil {
			return wallet.Receipt{}, fmt.Errorf("memdb: read outbox: %w", err)
		} else if existing != nil {
			return wallet.Receipt{}, fmt.Errorf("memdb: outbox event %s exists: %w", o.EventID, persistence.ErrConflict)
		}
		row := &wallet.OutboxRecord{
			ID: next, EventID: o.EventID, AppCode: o.AppCode, UserID: o.UserID, EventType: o.EventType,
			Payload: slices.Clone(o.Payload), Status: wallet.OutboxPending,
			CreatedAtMs: plan.NowMs, UpdatedAtMs: plan.NowMs,
		}
		if err := txn.Insert(tableWalletOutbox, row); err != nil {
			return wallet.Receipt{}, fmt.Errorf("memdb: write outbox: %w", err)
		}
		next++
	}
	txn.Commit()
	return wallet.Receipt{Record: cloneTxRecord(rec)}, nil
}

func nextOutboxID(txn *memdb.Txn) (int64, error) {
	last, err := txn.Last(tableWalletOutbox, indexID)
	if err != nil {
		return 0, fmt.Errorf("memdb: read outbox: %w", err)
	}
	if last == nil {
		return 1, nil
	}
	return last.(*wallet.OutboxRecord).ID + 1, nil
}

func findWalletTx(txn *memdb.Txn, appCode, commandID string) (wallet.TxRecord, error) {
	raw, err := txn.First(tableWalletTransactions, indexCommandID, appCode, commandID)
	if err != nil {
		return wallet.TxRecord{}, fmt.Errorf("memdb: read wallet transaction: %w", err)
	}
	if raw == nil {
		return wallet.TxRecord{}, persistence.ErrNotFound
	}
	return cloneTxRecord(*raw.(*wallet.TxRecord)), nil
}

func getAccount(txn *memdb.Txn, k wallet.AccountKey) (wallet.Account, error) {
	raw, err := txn.First(tableWalletAccounts, indexID, k.AppCode, k.UserID, k.AssetType)
	if err != nil {
		return wallet.Account{}, fmt.Errorf("memdb: read account: %w", err)
	}
	if raw == nil {
		return wallet.Account{AppCode: k.AppCode, UserID: k.UserID, AssetType: k.AssetType}, nil
	}
	return *raw.(*wallet.Account), nil
}

func getVip(txn *memdb.Txn, appCode, userID string) (wallet.Vip, error) {
	raw, err := txn.First(tableWalletVip, indexID, appCode, userID)
	if err != nil {
		return wallet.Vip{}, fmt.Errorf("memdb: read vip: %w", err)
	}
	if raw == nil {
		return wallet.Vip{}, persistence.ErrNotFound
	}
	return *raw.(*wallet.Vip), nil
}

func cloneTxRecord(r wallet.TxRecord) wallet.TxRecord {
	r.Result = slices.Clone(r.Result)
	return r
}

// Accounts implements wallet.Store.
func (s *WalletStore) Accounts(ctx context.Context, appCode, userID string) ([]wallet.Account, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if appCode == "" || userID == "" {
		return nil, nil
	}
	it, err := s.db.Txn(false).Get(tableWalletAccounts, indexID+"_prefix", appCode, userID)
	if err != nil {
		return nil, fmt.Errorf("memdb: list accounts: %w", err)
	}
	var out []wallet.Account
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, *raw.(*wallet.Account))
	}
	return out, nil
}

// Vip implements wallet.Store.
func (s *WalletStore) Vip(ctx context.Context, appCode, userID string) (wallet.Vip, error) {
	if err := s.ready(ctx); err != nil {
		return wallet.Vip{}, err
	}
	if appCode == "" || userID == "" {
		return wallet.Vip{}, persistence.ErrNotFound
	}
	return getVip(s.db.Txn(false), appCode, userID)
}

// Ledger implements wallet.Store.
func (s *WalletStore) Ledger(ctx context.Context, k wallet.AccountKey) ([]wallet.LedgerEntry, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if k.AppCode == "" || k.UserID == "" || k.AssetType == "" {
		return nil, nil
	}
	it, err := s.db.Txn(false).Get(tableWalletLedger, indexID+"_prefix", k.AppCode, k.UserID, k.AssetType)
	if err != nil {
		return nil, fmt.Errorf("memdb: list ledger: %w", err)
	}
	var out []wallet.LedgerEntry
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, *raw.(*wallet.LedgerEntry))
	}
	return out, nil
}

// Transaction implements wallet.Store.
func (s *WalletStore) Transaction(ctx context.Context, appCode, commandID string) (wallet.TxRecord, error) {
	if err := s.ready(ctx); err != nil {
		return wallet.TxRecord{}, err
	}
	if appCode == "" || commandID == "" {
		return wallet.TxRecord{}, persistence.ErrNotFound
	}
	return findWalletTx(s.db.Txn(false), appCode, commandID)
}

// ListOutboxAfter implements wallet.Store. Ids here are taken under the
// single writer lock, so they become visible in order.
func (s *WalletStore) ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]wallet.OutboxRecord, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	it, err := s.db.Txn(false).LowerBound(tableWalletOutbox, indexID, afterID+1)
	if err != nil {
		return nil, fmt.Errorf("memdb: scan outbox: %w", err)
	}
	var out []wallet.OutboxRecord
	for raw := it.Next(); raw != nil && len(out) < limit; raw = it.Next() {
		r := *raw.(*wallet.OutboxRecord)
		r.Payload = slices.Clone(r.Payload)
		out = append(out, r)
	}
	return out, nil
}

// GiftHold implements wallet.Store.
func (s *WalletStore) GiftHold(ctx context.Context, appCode, commandID string) (wallet.GiftHold, error) {
	if err := s.ready(ctx); err != nil {
		return wallet.GiftHold{}, err
	}
	raw, err := s.db.Txn(false).First(tableWalletGiftHolds, indexID, appCode, commandID)
	if err != nil {
		return wallet.GiftHold{}, fmt.Errorf("memdb: read gift hold: %w", err)
	}
	if raw == nil {
		return wallet.GiftHold{}, persistence.ErrNotFound
	}
	return *raw.(*wallet.GiftHold), nil
}

// OpenGiftHolds implements wallet.Store.
func (s *WalletStore) OpenGiftHolds(ctx context.Context, beforeMs int64, limit int) ([]wallet.GiftHold, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	it, err := s.db.Txn(false).LowerBound(tableWalletGiftHolds, indexStatus, wallet.HoldOpen, int64(math.MinInt64))
	if err != nil {
		return nil, fmt.Errorf("memdb: scan gift holds: %w", err)
	}
	var out []wallet.GiftHold
	for raw := it.Next(); raw != nil && len(out) < limit; raw = it.Next() {
		h := raw.(*wallet.GiftHold)
		if h.State != wallet.HoldOpen || h.CreatedAtMs >= beforeMs {
			break
		}
		out = append(out, *h)
	}
	return out, nil
}

// GiftHoldStats implements wallet.Store.
func (s *WalletStore) GiftHoldStats(ctx context.Context) (wallet.HoldStats, error) {
	if err := s.ready(ctx); err != nil {
		return wallet.HoldStats{}, err
	}
	it, err := s.db.Txn(false).Get(tableWalletGiftHolds, indexStatus+"_prefix", wallet.HoldOpen)
	if err != nil {
		return wallet.HoldStats{}, fmt.Errorf("memdb: scan gift holds: %w", err)
	}
	var st wallet.HoldStats
	for raw := it.Next(); raw != nil; raw = it.Next() {
		h := raw.(*wallet.GiftHold)
		if st.Open == 0 {
			st.OldestCreatedAtMs = h.CreatedAtMs
		}
		st.Open++
	}
	return st, nil
}
