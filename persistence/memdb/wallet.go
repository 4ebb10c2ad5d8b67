package memdb

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/persistence"
)

// WalletStore is the go-memdb wallet store (dev mode, fast tests). go-memdb
// has one writer at a time, so Exec is trivially serialisable: the lock of
// every account is the MemDB's writer lock. It has its own MemDB; the zero
// value is not usable, call NewWalletStore.
type WalletStore struct {
	db     *memdb.MemDB
	closed atomic.Bool
	leases purgeLeases // purge.go
}

var _ persistence.WalletStore = (*WalletStore)(nil)

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

// Exec implements persistence.WalletStore.
func (s *WalletStore) Exec(ctx context.Context, tx persistence.WalletTx) (persistence.WalletReceipt, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.WalletReceipt{}, err
	}
	if tx.AppCode == "" || tx.CommandID == "" || tx.Decide == nil {
		// go-memdb cannot index empty strings: refuse rather than slip
		// past the idempotency index.
		return persistence.WalletReceipt{}, fmt.Errorf("memdb: wallet tx needs app_code, command_id and Decide")
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	if rec, err := findWalletTx(txn, tx.AppCode, tx.CommandID); err == nil {
		return persistence.WalletReceipt{Record: rec, Duplicate: true}, nil
	} else if err != persistence.ErrNotFound {
		return persistence.WalletReceipt{}, err
	}
	view := persistence.WalletView{Accounts: map[persistence.AccountKey]persistence.Account{}}
	for _, k := range persistence.SortedAccountKeys(tx.Lock) {
		a, err := getAccount(txn, k)
		if err != nil {
			return persistence.WalletReceipt{}, err
		}
		view.Accounts[k] = a
	}
	if tx.LockVip != "" {
		v, err := getVip(txn, tx.AppCode, tx.LockVip)
		if err != nil && err != persistence.ErrNotFound {
			return persistence.WalletReceipt{}, err
		}
		if err != nil {
			v = persistence.Vip{AppCode: tx.AppCode, UserID: tx.LockVip}
		}
		view.Vip = v
	}
	plan, err := tx.Decide(view)
	if err != nil {
		return persistence.WalletReceipt{}, err
	}
	if err := persistence.CheckWalletPlan(tx, view, plan); err != nil {
		return persistence.WalletReceipt{}, err
	}
	rec := plan.Record
	rec.Result = slices.Clone(rec.Result)
	if err := txn.Insert(tableWalletTransactions, &rec); err != nil {
		return persistence.WalletReceipt{}, fmt.Errorf("memdb: insert wallet transaction: %w", err)
	}
	for _, a := range plan.Accounts {
		a := a
		if err := txn.Insert(tableWalletAccounts, &a); err != nil {
			return persistence.WalletReceipt{}, fmt.Errorf("memdb: write account: %w", err)
		}
	}
	for _, e := range plan.Ledger {
		e := e
		if err := txn.Insert(tableWalletLedger, &e); err != nil {
			return persistence.WalletReceipt{}, fmt.Errorf("memdb: write ledger: %w", err)
		}
	}
	if plan.Vip != nil {
		v := *plan.Vip
		if err := txn.Insert(tableWalletVip, &v); err != nil {
			return persistence.WalletReceipt{}, fmt.Errorf("memdb: write vip: %w", err)
		}
	}
	if plan.Hold != nil {
		h := *plan.Hold
		// The park columns are not the plan's to write (MySQL's upsert
		// leaves them too): a settle keeps them as history.
		h.ParkedAtMs, h.ParkReason = 0, ""
		if raw, err := txn.First(tableWalletGiftHolds, indexID, h.AppCode, h.CommandID); err != nil {
			return persistence.WalletReceipt{}, fmt.Errorf("memdb: read gift hold: %w", err)
		} else if raw != nil {
			old := raw.(*persistence.GiftHold)
			h.ParkedAtMs, h.ParkReason = old.ParkedAtMs, old.ParkReason
		}
		if err := txn.Insert(tableWalletGiftHolds, &h); err != nil {
			return persistence.WalletReceipt{}, fmt.Errorf("memdb: write gift hold: %w", err)
		}
	}
	next, err := nextOutboxID(txn)
	if err != nil {
		return persistence.WalletReceipt{}, err
	}
	for _, o := range plan.Outbox {
		if existing, err := txn.First(tableWalletOutbox, indexWalletEventID, o.EventID); err != nil {
			return persistence.WalletReceipt{}, fmt.Errorf("memdb: read outbox: %w", err)
		} else if existing != nil {
			return persistence.WalletReceipt{}, fmt.Errorf("memdb: outbox event %s exists: %w", o.EventID, persistence.ErrConflict)
		}
		row := &persistence.WalletOutboxRecord{
			ID: next, EventID: o.EventID, AppCode: o.AppCode, UserID: o.UserID, EventType: o.EventType,
			Payload: slices.Clone(o.Payload), Status: persistence.OutboxPending,
			CreatedAtMs: plan.NowMs, UpdatedAtMs: plan.NowMs,
		}
		if err := txn.Insert(tableWalletOutbox, row); err != nil {
			return persistence.WalletReceipt{}, fmt.Errorf("memdb: write outbox: %w", err)
		}
		next++
	}
	txn.Commit()
	return persistence.WalletReceipt{Record: cloneTxRecord(rec)}, nil
}

func nextOutboxID(txn *memdb.Txn) (int64, error) {
	last, err := txn.Last(tableWalletOutbox, indexID)
	if err != nil {
		return 0, fmt.Errorf("memdb: read outbox: %w", err)
	}
	if last == nil {
		return 1, nil
	}
	return last.(*persistence.WalletOutboxRecord).ID + 1, nil
}

func findWalletTx(txn *memdb.Txn, appCode, commandID string) (persistence.WalletTxRecord, error) {
	raw, err := txn.First(tableWalletTransactions, indexCommandID, appCode, commandID)
	if err != nil {
		return persistence.WalletTxRecord{}, fmt.Errorf("memdb: read wallet transaction: %w", err)
	}
	if raw == nil {
		return persistence.WalletTxRecord{}, persistence.ErrNotFound
	}
	return cloneTxRecord(*raw.(*persistence.WalletTxRecord)), nil
}

func getAccount(txn *memdb.Txn, k persistence.AccountKey) (persistence.Account, error) {
	raw, err := txn.First(tableWalletAccounts, indexID, k.AppCode, k.UserID, k.AssetType)
	if err != nil {
		return persistence.Account{}, fmt.Errorf("memdb: read account: %w", err)
	}
	if raw == nil {
		return persistence.Account{AppCode: k.AppCode, UserID: k.UserID, AssetType: k.AssetType}, nil
	}
	return *raw.(*persistence.Account), nil
}

func getVip(txn *memdb.Txn, appCode, userID string) (persistence.Vip, error) {
	raw, err := txn.First(tableWalletVip, indexID, appCode, userID)
	if err != nil {
		return persistence.Vip{}, fmt.Errorf("memdb: read vip: %w", err)
	}
	if raw == nil {
		return persistence.Vip{}, persistence.ErrNotFound
	}
	return *raw.(*persistence.Vip), nil
}

func cloneTxRecord(r persistence.WalletTxRecord) persistence.WalletTxRecord {
	r.Result = slices.Clone(r.Result)
	return r
}

// Accounts implements persistence.WalletStore.
func (s *WalletStore) Accounts(ctx context.Context, appCode, userID string) ([]persistence.Account, error) {
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
	var out []persistence.Account
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, *raw.(*persistence.Account))
	}
	return out, nil
}

// Vip implements persistence.WalletStore.
func (s *WalletStore) Vip(ctx context.Context, appCode, userID string) (persistence.Vip, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.Vip{}, err
	}
	if appCode == "" || userID == "" {
		return persistence.Vip{}, persistence.ErrNotFound
	}
	return getVip(s.db.Txn(false), appCode, userID)
}

// Ledger implements persistence.WalletStore.
func (s *WalletStore) Ledger(ctx context.Context, k persistence.AccountKey) ([]persistence.LedgerEntry, error) {
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
	var out []persistence.LedgerEntry
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, *raw.(*persistence.LedgerEntry))
	}
	return out, nil
}

// Transaction implements persistence.WalletStore.
func (s *WalletStore) Transaction(ctx context.Context, appCode, commandID string) (persistence.WalletTxRecord, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.WalletTxRecord{}, err
	}
	if appCode == "" || commandID == "" {
		return persistence.WalletTxRecord{}, persistence.ErrNotFound
	}
	return findWalletTx(s.db.Txn(false), appCode, commandID)
}

// ListOutboxAfter implements persistence.WalletStore. Ids here are taken under the
// single writer lock, so they become visible in order.
func (s *WalletStore) ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]persistence.WalletOutboxRecord, error) {
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
	var out []persistence.WalletOutboxRecord
	for raw := it.Next(); raw != nil && len(out) < limit; raw = it.Next() {
		r := *raw.(*persistence.WalletOutboxRecord)
		r.Payload = slices.Clone(r.Payload)
		out = append(out, r)
	}
	return out, nil
}

// GiftHold implements wallet.Store.
func (s *WalletStore) GiftHold(ctx context.Context, appCode, commandID string) (persistence.GiftHold, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.GiftHold{}, err
	}
	raw, err := s.db.Txn(false).First(tableWalletGiftHolds, indexID, appCode, commandID)
	if err != nil {
		return persistence.GiftHold{}, fmt.Errorf("memdb: read gift hold: %w", err)
	}
	if raw == nil {
		return persistence.GiftHold{}, persistence.ErrNotFound
	}
	return *raw.(*persistence.GiftHold), nil
}

// OpenGiftHolds implements wallet.Store.
func (s *WalletStore) OpenGiftHolds(ctx context.Context, beforeMs int64, limit int) ([]persistence.GiftHold, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	it, err := s.db.Txn(false).LowerBound(tableWalletGiftHolds, indexStatus, persistence.HoldOpen, int64(0), int64(math.MinInt64))
	if err != nil {
		return nil, fmt.Errorf("memdb: scan gift holds: %w", err)
	}
	var out []persistence.GiftHold
	for raw := it.Next(); raw != nil && len(out) < limit; raw = it.Next() {
		h := raw.(*persistence.GiftHold)
		if h.State != persistence.HoldOpen || h.ParkedAtMs != 0 || h.CreatedAtMs >= beforeMs {
			break
		}
		out = append(out, *h)
	}
	return out, nil
}

// ParkedGiftHolds implements persistence.GiftHoldStore.
func (s *WalletStore) ParkedGiftHolds(ctx context.Context, limit int) ([]persistence.GiftHold, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	it, err := s.db.Txn(false).LowerBound(tableWalletGiftHolds, indexStatus, persistence.HoldOpen, int64(1), int64(math.MinInt64))
	if err != nil {
		return nil, fmt.Errorf("memdb: scan gift holds: %w", err)
	}
	var out []persistence.GiftHold
	for raw := it.Next(); raw != nil && len(out) < limit; raw = it.Next() {
		h := raw.(*persistence.GiftHold)
		if h.State != persistence.HoldOpen {
			break
		}
		out = append(out, *h)
	}
	return out, nil
}

// ParkGiftHold implements persistence.GiftHoldStore.
func (s *WalletStore) ParkGiftHold(ctx context.Context, appCode, commandID string, nowMs int64, reason string) (bool, error) {
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	raw, err := txn.First(tableWalletGiftHolds, indexID, appCode, commandID)
	if err != nil {
		return false, fmt.Errorf("memdb: read gift hold: %w", err)
	}
	if raw == nil {
		return false, persistence.ErrNotFound
	}
	h := *raw.(*persistence.GiftHold)
	if h.State != persistence.HoldOpen || h.ParkedAtMs != 0 {
		return false, nil
	}
	h.ParkedAtMs, h.ParkReason = max(nowMs, 1), persistence.CutParkReason(reason)
	if err := txn.Insert(tableWalletGiftHolds, &h); err != nil {
		return false, fmt.Errorf("memdb: park gift hold: %w", err)
	}
	txn.Commit()
	return true, nil
}

// GiftHoldStats implements wallet.Store.
func (s *WalletStore) GiftHoldStats(ctx context.Context) (persistence.HoldStats, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.HoldStats{}, err
	}
	it, err := s.db.Txn(false).Get(tableWalletGiftHolds, indexStatus+"_prefix", persistence.HoldOpen)
	if err != nil {
		return persistence.HoldStats{}, fmt.Errorf("memdb: scan gift holds: %w", err)
	}
	var st persistence.HoldStats
	for raw := it.Next(); raw != nil; raw = it.Next() {
		h := raw.(*persistence.GiftHold)
		if st.Open == 0 || h.CreatedAtMs < st.OldestCreatedAtMs {
			st.OldestCreatedAtMs = h.CreatedAtMs
		}
		st.Open++
		if h.ParkedAtMs != 0 {
			st.Parked++
		}
	}
	return st, nil
}
