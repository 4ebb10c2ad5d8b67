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
// returns its first result and writes nothing, while the same command_id
// with a different request (its fingerprint differs) is ErrCommandReused.
//
// A room gift is one outcome. The wallet and the room log are
// two databases, so no one transaction can charge the sender and append
// RoomGiftSent. The design, step by step, with why each step is safe
// whenever the process dies between two of them:
//
//  1. HoldGift reserves: the sender's COIN moves from available to frozen
//     and a wallet_gift_holds row (state open) is written, in one wallet
//     transaction keyed by the gift's command_id. The receiver gets
//     nothing yet, so a gift that never happens has paid nobody. A retry
//     finds the reservation and reserves nothing more.
//  2. The grain appends the gift; the append also inserts the gift's row
//     in room_gift_outcomes (outcome sent). That row's primary key is the
//     only fence the design needs: whoever decides a gift did not happen
//     first inserts outcome void (RoomStore.VoidGift), and only one of the
//     two inserts can ever commit. After a void no append of the gift can
//     commit, however late a timed-out COMMIT reaches the server, and
//     after a sent no void can.
//  3. ConfirmGift spends the reservation (frozen down, receiver's DIAMOND
//     up); RefundGift returns it (frozen back to available). Both write
//     their transaction under one derived command_id (settleCommandID),
//     so the unique key of wallet_transactions lets only one of them
//     commit, once.
//
// Who settles: the grain confirms after its append; after a failed
// append it calls VoidGift and confirms (the commit had happened, its
// acknowledgement was lost) or refunds. If the grain dies, or a store is
// down, the reservation stays open, and the reconciler
// (actors/wallet/giftsettle) takes every reservation older than a bound:
// VoidGift in the gift's room, then confirm or refund by its answer. A
// client retry with the same command_id meets the same rules: the
// reservation exists, the append either lands (if nothing voided it) or
// is refused by the void and refunded; a refunded id answers
// ErrGiftRefunded for ever. The bound is only about cost, never safety:
// a short one refunds gifts a slow append would still have delivered.
//
// With a remote wallet (wallet.addr) nothing changes but the transport:
// the room node reserves, confirms and refunds over operator-only
// WalletService RPCs with the same idempotency, and the reconciler runs
// on the room nodes, listing open reservations and settling them over
// gRPC while it voids in its own room store. That is the simplest
// correct placement: the void must be written where the rooms append,
// which the room node has by construction and the wallet process only
// by configuration (on go-memdb, or another deployment's database, its
// room store is not the rooms', and a void there fences nothing, so a
// delivered gift would be refunded). Running it in the wallet process
// would need a VoidGift RPC back to the rooms and a way to find them;
// running it beside the fence needs one list RPC. Hence a wallet serves
// one room store, and a node without the room role does not reconcile.
//
// Simpler designs fail: debit-then-append (the old one) charges without a
// gift when the append fails; append-then-debit delivers without a charge
// when the debit fails; a compensating refund after a failed append is
// wrong when the failure hid a commit; a reconciler that refunds by age
// alone is wrong when a paused node's append lands after it. The void row
// closes the last two: it turns "no record yet" into "never".
//
// Money is conserved: across all accounts, available + frozen COIN
// changes only by credits and by confirmed gifts' prices, and DIAMOND
// only by credits and confirmed gifts' shares; a reserve and a refund
// only move COIN between available and frozen. Each step writes its
// ledger entries and WalletBalanceChanged events with the account's next
// balance_version, so a refund reaches the user as a notice too.
package wallet
