package memdb

import (
	"github.com/hashicorp/go-memdb"
)

// Table names of the wallet domain, which lives in its own MemDB (see
// WalletStore) so its single writer lock never stalls room appends.
const (
	tableWalletAccounts     = "wallet_accounts"
	tableWalletTransactions = "wallet_transactions"
	tableWalletLedger       = "wallet_ledger"
	tableWalletVip          = "wallet_vip"
	tableWalletOutbox       = "wallet_outbox"
	tableWalletGiftHolds    = "wallet_gift_holds"

	indexWalletEventID = "event_id"
)

// walletTables lists the wallet domain's tables; walletSchema assembles
// them.
var walletTables = []func() *memdb.TableSchema{
	walletAccountsTable,
	walletTransactionsTable,
	walletLedgerTable,
	walletVipTable,
	walletOutboxTable,
	walletGiftHoldsTable,
}

// walletSchema is the schema of the wallet MemDB.
func walletSchema() *memdb.DBSchema {
	return newSchema(walletTables...)
}

// walletAccountsTable holds *persistence.Account rows.
func walletAccountsTable() *memdb.TableSchema {
	return table(tableWalletAccounts,
		// id serves the account loads of Exec and, by its
		// (app_code, user_id) prefix, Accounts.
		index(indexID, true, strField("AppCode"), strField("UserID"), strField("AssetType")))
}

// walletTransactionsTable holds *persistence.WalletTxRecord rows.
func walletTransactionsTable() *memdb.TableSchema {
	return table(tableWalletTransactions,
		// id keeps transaction ids unique.
		index(indexID, true, strField("TransactionID")),
		// command_id serves the idempotency check of Exec and
		// Transaction.
		index(indexCommandID, true, strField("AppCode"), strField("CommandID")))
}

// walletLedgerTable holds *persistence.LedgerEntry rows.
func walletLedgerTable() *memdb.TableSchema {
	return table(tableWalletLedger,
		// id serves Ledger's per-account scan in version order, and
		// refuses two entries for one version of an account.
		index(indexID, true, strField("AppCode"), strField("UserID"), strField("AssetType"), intField("BalanceVersion")))
}

// walletVipTable holds *persistence.Vip rows, one per user.
func walletVipTable() *memdb.TableSchema {
	return table(tableWalletVip,
		// id serves Vip and the VIP load of Exec.
		index(indexID, true, strField("AppCode"), strField("UserID")))
}

// walletOutboxTable holds *persistence.WalletOutboxRecord rows.
func walletOutboxTable() *memdb.TableSchema {
	return table(tableWalletOutbox,
		// id serves ListOutboxAfter's cursor scan and the next id.
		index(indexID, true, intField("ID")),
		// event_id keeps event ids unique, as the MySQL primary key
		// does.
		index(indexWalletEventID, true, strField("EventID")))
}

// walletGiftHoldsTable holds *wallet.GiftHold rows; state serves the
// reconciler's scan of open rows that are not parked (ParkedAtMs 0) by
// age, the operator's list of parked ones by park time and the open-row
// metrics, as MySQL's (state, parked_at_ms, created_at_ms) key does.
func walletGiftHoldsTable() *memdb.TableSchema {
	return table(tableWalletGiftHolds,
		index(indexID, true, strField("AppCode"), strField("CommandID")),
		index(indexStatus, false, strField("State"), intField("ParkedAtMs"), intField("CreatedAtMs")))
}
