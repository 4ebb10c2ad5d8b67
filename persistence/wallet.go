package persistence

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Outbox event types of wallet_outbox (seed 003).
const (
	EventBalanceChanged = "WalletBalanceChanged"
	EventVipActivated   = "VipActivated"
)

// WalletStore is what a wallet backend implements (persistence/memdb and
// persistence/mysql); actors/wallet/wallettest.RunStore is the contract
// both must pass. Errors wrap ErrUnavailable when the backend
// cannot be reached and ErrNotFound for a missing row.
type WalletStore interface {
	// Exec runs one wallet transaction. In one atomic unit it:
	//  1. looks up tx.CommandID; if the app already has a transaction with
	//     it, returns that record with Duplicate set and writes nothing;
	//  2. locks the accounts in tx.Lock (and the VIP row of tx.LockVip),
	//     in AccountKey order, creating missing accounts at zero;
	//  3. calls tx.Decide with the locked state; if Decide fails, writes
	//     nothing and returns its error unchanged;
	//  4. checks the plan with CheckWalletPlan, then writes the transaction
	//     record, the changed accounts, the ledger entries, the VIP state
	//     and the outbox rows (status pending), and commits.
	// Two Execs with the same command_id never both commit: the loser gets
	// the winner's record as a Duplicate. Decide may be called more than
	// once (a backend retries on deadlock) and must be pure.
	Exec(ctx context.Context, tx WalletTx) (WalletReceipt, error)
	// Accounts returns the user's accounts that exist, in asset order.
	Accounts(ctx context.Context, appCode, userID string) ([]Account, error)
	// Vip returns the user's VIP row, or ErrNotFound.
	Vip(ctx context.Context, appCode, userID string) (Vip, error)
	// Ledger returns the account's entries in balance_version order.
	Ledger(ctx context.Context, key AccountKey) ([]LedgerEntry, error)
	// Transaction returns the record of commandID, or
	// ErrNotFound.
	Transaction(ctx context.Context, appCode, commandID string) (WalletTxRecord, error)
	// ListOutboxAfter returns up to limit wallet_outbox rows with
	// id > afterID in id order: the notice service's scan cursor. On
	// MySQL an id is taken at insert and becomes visible at commit, so a
	// smaller id can appear after a larger one was read (two users'
	// transactions commit out of order). A cursor reader must re-read a
	// window behind its cursor (rows younger than the longest transaction,
	// mysql.query_timeout) and dedupe by event_id.
	ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]WalletOutboxRecord, error)
	Close() error
}

// WalletOutboxReader is a read-only view of wallet_outbox for its
// consumers (the wallet notice worker): WalletStore.ListOutboxAfter, with
// its ordering caveat, and nothing else.
type WalletOutboxReader interface {
	ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]WalletOutboxRecord, error)
}

// WalletTx is one wallet transaction for WalletStore.Exec.
type WalletTx struct {
	AppCode   string
	CommandID string
	// Lock is the set of accounts Decide may change; the store locks them
	// in AccountKey order whatever order they are given in.
	Lock []AccountKey
	// LockVip is a user whose VIP row Decide may change ("" = none).
	LockVip string
	// Decide computes the change from the locked state. It must not do
	// I/O: it may run more than once.
	Decide func(WalletView) (WalletPlan, error)
}

// WalletView is the locked state a Decide sees: every account of WalletTx.Lock (zero
// with version 0 when new) and the VIP row of WalletTx.LockVip (zero when none).
type WalletView struct {
	Accounts map[AccountKey]Account
	Vip      Vip
}

// WalletPlan is what one transaction writes.
type WalletPlan struct {
	Record WalletTxRecord
	// Accounts are the new states of the changed accounts only.
	Accounts []Account
	// Ledger has one entry per changed account.
	Ledger []LedgerEntry
	// Vip, if set, replaces the user's VIP row.
	Vip    *Vip
	Outbox []WalletOutboxEvent
	// NowMs stamps outbox rows and new accounts.
	NowMs int64
}

// WalletReceipt is the outcome of Exec: the transaction record, and whether it
// was already there.
type WalletReceipt struct {
	Record    WalletTxRecord
	Duplicate bool
}

// CheckWalletPlan enforces the invariants a backend must never write past, even
// if a Decide is wrong: each changed account was locked, its version is
// the locked one plus one, no balance goes negative, every changed account
// has exactly one matching ledger entry and outbox row. Backends call it
// before writing.
func CheckWalletPlan(tx WalletTx, v WalletView, p WalletPlan) error {
	if p.Record.AppCode != tx.AppCode || p.Record.CommandID != tx.CommandID || p.Record.TransactionID == "" {
		return fmt.Errorf("wallet: plan record %q/%q does not match tx %q/%q", p.Record.AppCode, p.Record.CommandID, tx.AppCode, tx.CommandID)
	}
	if len(p.Ledger) != len(p.Accounts) {
		return fmt.Errorf("wallet: plan has %d accounts and %d ledger entries", len(p.Accounts), len(p.Ledger))
	}
	seen := map[AccountKey]bool{}
	for i, a := range p.Accounts {
		k := a.Key()
		old, locked := v.Accounts[k]
		if !locked || !slices.Contains(tx.Lock, k) {
			return fmt.Errorf("wallet: plan changes account %s it did not lock", k)
		}
		if seen[k] {
			return fmt.Errorf("wallet: plan changes account %s twice", k)
		}
		seen[k] = true
		if a.BalanceVersion != old.BalanceVersion+1 {
			return fmt.Errorf("wallet: account %s version %d after %d", k, a.BalanceVersion, old.BalanceVersion)
		}
		if a.Available < 0 || a.Frozen < 0 {
			return fmt.Errorf("wallet: account %s would go negative", k)
		}
		e := p.Ledger[i]
		if e.Key() != k || e.BalanceVersion != a.BalanceVersion || e.AvailableAfter != a.Available ||
			e.FrozenAfter != a.Frozen || e.AvailableDelta != a.Available-old.Available ||
			e.FrozenDelta != a.Frozen-old.Frozen || e.TransactionID != p.Record.TransactionID {
			return fmt.Errorf("wallet: ledger entry %d does not match account %s", i, k)
		}
		id := BalanceEventID(p.Record.TransactionID, k.UserID, k.AssetType)
		if !slices.ContainsFunc(p.Outbox, func(o WalletOutboxEvent) bool { return o.EventID == id }) {
			return fmt.Errorf("wallet: no %s outbox row for account %s", EventBalanceChanged, k)
		}
	}
	if p.Vip != nil && (p.Vip.AppCode != tx.AppCode || p.Vip.UserID != tx.LockVip || tx.LockVip == "") {
		return fmt.Errorf("wallet: plan changes VIP of %q it did not lock", p.Vip.UserID)
	}
	ids := map[string]bool{}
	for _, o := range p.Outbox {
		if o.EventID == "" || ids[o.EventID] {
			return fmt.Errorf("wallet: outbox event id %q empty or repeated", o.EventID)
		}
		ids[o.EventID] = true
	}
	return nil
}

// SortedAccountKeys returns tx.Lock deduplicated in lock order.
func SortedAccountKeys(keys []AccountKey) []AccountKey {
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b AccountKey) int {
		switch {
		case a.Less(b):
			return -1
		case b.Less(a):
			return 1
		}
		return 0
	})
	return slices.Compact(out)
}

// AccountKey names one account.
type AccountKey struct {
	AppCode   string
	UserID    string
	AssetType string
}

func (k AccountKey) String() string { return k.AppCode + "/" + k.UserID + "/" + k.AssetType }

// Less orders keys by (app_code, user_id, asset_type): the order in which
// a store locks accounts, so two transactions never wait on each other in
// a cycle.
func (k AccountKey) Less(o AccountKey) bool {
	if c := strings.Compare(k.AppCode, o.AppCode); c != 0 {
		return c < 0
	}
	if c := strings.Compare(k.UserID, o.UserID); c != 0 {
		return c < 0
	}
	return k.AssetType < o.AssetType
}

// Account is one balance. BalanceVersion goes up by exactly one per change,
// so a client can drop a stale or repeated WalletBalanceChanged.
type Account struct {
	AppCode        string `json:"app_code"`
	UserID         string `json:"user_id"`
	AssetType      string `json:"asset_type"`
	Available      int64  `json:"available"`
	Frozen         int64  `json:"frozen"`
	BalanceVersion int64  `json:"balance_version"`
	UpdatedAtMs    int64  `json:"updated_at_ms"`
}

// Key returns the account's key.
func (a Account) Key() AccountKey {
	return AccountKey{AppCode: a.AppCode, UserID: a.UserID, AssetType: a.AssetType}
}

// LedgerEntry is one change of one account. The available_after of the
// entry with the highest version is the account's available balance, and
// the sum of available_delta over an account's entries equals it too.
type LedgerEntry struct {
	TransactionID  string `json:"transaction_id"`
	CommandID      string `json:"command_id"`
	AppCode        string `json:"app_code"`
	UserID         string `json:"user_id"`
	AssetType      string `json:"asset_type"`
	AvailableDelta int64  `json:"available_delta"`
	FrozenDelta    int64  `json:"frozen_delta"`
	AvailableAfter int64  `json:"available_after"`
	FrozenAfter    int64  `json:"frozen_after"`
	BalanceVersion int64  `json:"balance_version"`
	CreatedAtMs    int64  `json:"created_at_ms"`
}

// Key returns the entry's account.
func (e LedgerEntry) Key() AccountKey {
	return AccountKey{AppCode: e.AppCode, UserID: e.UserID, AssetType: e.AssetType}
}

// Vip is one user's VIP state. Level 0 or ExpiresAtMs <= now means no VIP.
type Vip struct {
	AppCode     string `json:"app_code"`
	UserID      string `json:"user_id"`
	Level       int32  `json:"level"`
	StartedAtMs int64  `json:"started_at_ms"`
	ExpiresAtMs int64  `json:"expires_at_ms"`
	UpdatedAtMs int64  `json:"updated_at_ms"`
}

// ActiveLevel is the level in force at nowMs (0 when expired).
func (v Vip) ActiveLevel(nowMs int64) int32 {
	if v.ExpiresAtMs <= nowMs {
		return 0
	}
	return v.Level
}

// WalletTxRecord is a committed wallet transaction: the idempotency record of
// its command_id. Result is the operation's reply as first computed,
// replayed verbatim for a repeated command_id.
type WalletTxRecord struct {
	TransactionID string          `json:"transaction_id"`
	AppCode       string          `json:"app_code"`
	CommandID     string          `json:"command_id"`
	Kind          string          `json:"kind"`
	Fingerprint   string          `json:"fingerprint"`
	Result        json.RawMessage `json:"result"`
	CreatedAtMs   int64           `json:"created_at_ms"`
}

// WalletOutboxEvent is a wallet_outbox row to write. Payload is the seed-003
// JSON the notice service forwards to the client.
type WalletOutboxEvent struct {
	EventID   string
	AppCode   string
	UserID    string
	EventType string
	Payload   json.RawMessage
}

// WalletOutboxRecord is a stored wallet_outbox row. ID is an ascending cursor for
// consumers; see WalletStore.ListOutboxAfter for its ordering caveat.
type WalletOutboxRecord struct {
	ID          int64           `json:"id"`
	EventID     string          `json:"event_id"`
	AppCode     string          `json:"app_code"`
	UserID      string          `json:"user_id"`
	EventType   string          `json:"event_type"`
	Payload     json.RawMessage `json:"payload"`
	Status      string          `json:"status"`
	CreatedAtMs int64           `json:"created_at_ms"`
	UpdatedAtMs int64           `json:"updated_at_ms"`
}

// BalanceEventID is seed 003's event_id of a WalletBalanceChanged:
// "<transaction_id>:WalletBalanceChanged:<user_id>:<asset_type>". It is
// derived, not random, so the same change always has the same id.
func BalanceEventID(txID, userID, asset string) string {
	return txID + ":" + EventBalanceChanged + ":" + userID + ":" + asset
}

// VipEventID is the event_id of a VipActivated, in the same derived form.
func VipEventID(txID, userID string) string {
	return txID + ":" + EventVipActivated + ":" + userID
}
