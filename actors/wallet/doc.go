// Package wallet owns balances: accounts per (app_code, user_id,
// asset_type) with available, frozen and balance_version, the ledger, the
// VIP state of each user, and the wallet_outbox facts (WalletBalanceChanged,
// VipActivated) that seed 003's notice service delivers. It holds the rules
// (gift catalog, prices, diamond ratio, VIP upgrade/renew) as pure functions
// and drives persistence.WalletStore, the contract its backends
// (persistence/memdb, persistence/mysql) implement; it does no I/O itself and must not import a store backend, a
// gRPC package or the room actors.
//
// Where a change runs. A wallet change is one store transaction, not a
// message to a per-user grain. The store locks the accounts a command
// touches (SELECT ... FOR UPDATE in a fixed order on MySQL, the single
// writer on go-memdb), checks command_id, calls the pure decision with the
// locked balances, and commits the transaction record, the ledger, the
// accounts and the wallet_outbox rows together. We chose this over a grain
// per user because a gift touches two users: with grains the sender's debit
// and the receiver's credit would be two commits in two actors, so either
// the wallet needs a saga (and a receiver credit that can lag or be lost
// and re-driven) or one grain must own both rows, which no identity scheme
// gives. Row locks make the two-account change atomic, serialise one user's
// changes across every node without depending on cluster placement (a grain
// activated twice during a membership change would be two writers; the
// database never is), and survive process crashes with nothing to replay.
// The price is lock contention on a hot sender, which the Wallet benchmark
// in docs/benchmarks.md measures; idempotency rests on the unique key
// (app_code, command_id) of the transaction record, so a retried command
// returns its first result and writes nothing.
package wallet
