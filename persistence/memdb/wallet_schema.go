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
	return &memdb.TableSchema{
		Name: tableWalletAccounts,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves the account loads of Exec and, by its
			// (app_code, user_id) prefix, Accounts.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "UserID"},
					&memdb.StringFieldIndex{Field: "AssetType"},
				}},
			},
		},
	}
}

// walletTransactionsTable holds *persistence.WalletTxRecord rows.
func walletTransactionsTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableWalletTransactions,
		Indexes: map[string]*memdb.IndexSchema{
			// id keeps transaction ids unique.
			indexID: {
				Name:    indexID,
				Unique:  true,
				Indexer: &memdb.StringFieldIndex{Field: "TransactionID"},
			},
			// command_id serves the idempotency check of Exec and
			// Transaction.
			indexCommandID: {
				Name:   indexCommandID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "CommandID"},
				}},
			},
		},
	}
}

// walletLedgerTable holds *persistence.LedgerEntry rows.
func walletLedgerTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableWalletLedger,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves Ledger's per-account scan in version order, and
			// refuses two entries for one version of an account.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "UserID"},
					&memdb.StringFieldIndex{Field: "AssetType"},
					&memdb.IntFieldIndex{Field: "BalanceVersion"},
				}},
			},
		},
	}
}

// walletVipTable holds *persistence.Vip rows, one per user.
func walletVipTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableWalletVip,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves Vip and the VIP load of Exec.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "UserID"},
				}},
			},
		},
	}
}

// walletOutboxTable holds *persistence.WalletOutboxRecord rows.
func walletOutboxTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableWalletOutbox,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves ListOutboxAfter's cursor scan and the next id.
			indexID: {
				Name:    indexID,
				Unique:  true,
				Indexer: &memdb.IntFieldIndex{Field: "ID"},
			},
			// event_id keeps event ids unique, as the MySQL primary key
			// does.
			indexWalletEventID: {
				Name:    indexWalletEventID,
				Unique:  true,
				Indexer: &memdb.StringFieldIndex{Field: "EventID"},
			},
		},
	}
}

// walletGiftHoldsTable holds *wallet.GiftHold rows; state serves the
// reconciler's scan of open rows that are not parked (ParkedAtMs 0) by
// age, the operator's list of parked ones by park time and the open-row
// metrics, as MySQL's (state, parked_at_ms, created_at_ms) key does.
func walletGiftHoldsTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableWalletGiftHolds,
		Indexes: map[string]*memdb.IndexSchema{
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "CommandID"},
				}},
			},
			indexStatus: {
				Name: indexStatus,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "State"},
					&memdb.IntFieldIndex{Field: "ParkedAtMs"},
					&memdb.IntFieldIndex{Field: "CreatedAtMs"},
				}},
			},
		},
	}
}
