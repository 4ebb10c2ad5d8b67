// Package storetest holds the contract suites every store backend must
// pass, one file per contract: RunRoomStore (room.go: command log and
// snapshots), RunOutboxStore (outbox.go: room_outbox rows, leases and
// marks), RunRoomOutboxAfter and RunNoticeStore (notice.go) and the
// directory suite (directory.go). The wallet's suite drives the store
// through wallet.Service, so it lives in actors/wallet/wallettest. A
// backend's own test calls each suite with a factory of empty stores; the
// suite uses only the persistence interfaces, passes every time value as an
// argument (no sleeps, no clock) and knows nothing of any backend. It must
// not import a backend package or actors/, and it never talks to a server
// itself: the factory owns connections, databases and cleanup.
package storetest
