// Package persistence defines what roomcell stores and every contract a
// store backend implements, one file per concern: room.go (the room command
// log and snapshots, RoomStore), outbox.go (the transactional room outbox,
// OutboxStore), wallet.go (accounts, ledger, VIP and wallet_outbox,
// WalletStore), notice.go (notice deliveries and scan cursors, NoticeStore),
// directory.go (room presence), and errors.go (the classes callers branch
// on: ErrConflict, ErrUnavailable, ErrNotFound).
//
// The implementations live in sub-packages: memdb (go-memdb, the embedded
// default for dev mode and fast tests), mysql (production) and redis (the
// room directory). storetest holds the contract suites every backend runs;
// the wallet's suite drives the store through wallet.Service and lives in
// actors/wallet/wallettest. This package holds no I/O, and no package under
// persistence/ imports an actor, delivery or gRPC package
// (imports_test.go keeps it so).
package persistence
