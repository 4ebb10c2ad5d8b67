package wallet

import (
	"context"
	"fmt"
	"slices"
)

// Store is what a wallet backend implements (persistence/memdb and
// persistence/mysql); persistence/storetest.RunWalletStore is the contract
// both must pass. Errors wrap persistence.ErrUnavailable when the backend
// cannot be reached and persistence.ErrNotFound for a missing row.
type Store interface {
	// Exec runs one wallet transaction. In one atomic unit it:
	//  1. looks up tx.CommandID; if the app already has a transaction with
	//     it, returns that record with Duplicate set and writes nothing;
	//  2. locks the accounts in tx.Lock (and the VIP row of tx.LockVip),
	//     in AccountKey order, creating missing accounts at zero;
	//  3. calls tx.Decide with the locked state; if Decide fails, writes
	//     nothing and returns its error unchanged;
	//  4. checks the plan with CheckPlan, then writes the transaction
	//     record, the changed accounts, the ledger entries, the VIP state
	//     and the outbox rows (status pending), and commits.
	// Two Execs with the same command_id never both commit: the loser gets
	// the winner's record as a Duplicate. Decide may be called more than
	// once (a backend retries on deadlock) and must be pure.
	Exec(ctx context.Context, tx Tx) (Receipt, error)
	// Accounts returns the user's accounts that exist, in asset order.
	Accounts(ctx context.Context, appCode, userID string) ([]Account, error)
	// Vip returns the user's VIP row, or persistence.ErrNotFound.
	Vip(ctx context.Context, appCode, userID string) (Vip, error)
	// Ledger returns the account's entries in balance_version order.
	Ledger(ctx context.Context, key AccountKey) ([]LedgerEntry, error)
	// Transaction returns the record of commandID, or
	// persistence.ErrNotFound.
	Transaction(ctx context.Context, appCode, commandID string) (TxRecord, error)
	// ListOutboxAfter returns up to limit wallet_outbox rows with
	// id > afterID in id order: the notice service's scan cursor. On
	// MySQL an id is taken at insert and becomes visible at commit, so a
	// smaller id can appear after a larger one was read (two users'
	// transactions commit out of order). A cursor reader must re-read a
	// window behind its cursor (rows younger than the longest transaction,
	// mysql.query_timeout) and dedupe by event_id.
	ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]OutboxRecord, error)
	GiftHoldStore
	Close() error
}

// Tx is one wallet transaction for Store.Exec.
type Tx struct {
	AppCode   string
	CommandID string
	// Lock is the set of accounts Decide may change; the store locks them
	// in AccountKey order whatever order they are given in.
	Lock []AccountKey
	// LockVip is a user whose VIP row Decide may change ("" = none).
	LockVip string
	// Decide computes the change from the locked state. It must not do
	// I/O: it may run more than once.
	Decide func(View) (Plan, error)
}

// View is the locked state a Decide sees: every account of Tx.Lock (zero
// with version 0 when new) and the VIP row of Tx.LockVip (zero when none).
type View struct {
	Accounts map[AccountKey]Account
	Vip      Vip
}

// Plan is what one transaction writes.
type Plan struct {
	Record TxRecord
	// Accounts are the new states of the changed accounts only.
	Accounts []Account
	// Ledger has one entry per changed account.
	Ledger []LedgerEntry
	// Vip, if set, replaces the user's VIP row.
	Vip    *Vip
	Outbox []OutboxEvent
	// Hold, if set, inserts or replaces a gift's reservation row (hold.go).
	Hold *GiftHold
	// NowMs stamps outbox rows and new accounts.
	NowMs int64
}

// Receipt is the outcome of Exec: the transaction record, and whether it
// was already there.
type Receipt struct {
	Record    TxRecord
	Duplicate bool
}

// CheckPlan enforces the invariants a backend must never write past, even
// if a Decide is wrong: each changed account was locked, its version is
// the locked one plus one, no balance goes negative, every changed account
// has exactly one matching ledger entry and outbox row. Backends call it
// before writing.
func CheckPlan(tx Tx, v View, p Plan) error {
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
		if !slices.ContainsFunc(p.Outbox, func(o OutboxEvent) bool { return o.EventID == id }) {
			return fmt.Errorf("wallet: no %s outbox row for account %s", EventBalanceChanged, k)
		}
	}
	if p.Vip != nil && (p.Vip.AppCode != tx.AppCode || p.Vip.UserID != tx.LockVip || tx.LockVip == "") {
		return fmt.Errorf("wallet: plan changes VIP of %q it did not lock", p.Vip.UserID)
	}
	if h := p.Hold; h != nil && (h.AppCode != tx.AppCode || h.CommandID == "" || !validHoldState(h.State)) {
		return fmt.Errorf("wallet: plan writes gift hold %q/%q in state %q", h.AppCode, h.CommandID, h.State)
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

// SortedLocks returns tx.Lock deduplicated in lock order.
func SortedLocks(keys []AccountKey) []AccountKey {
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
