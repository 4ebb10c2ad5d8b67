// Package memdb is the embedded room store: persistence.Store on HashiCorp
// go-memdb, used by dev mode (roomcell --dev) and by fast tests. It owns the
// in-memory tables room_command_log, room_outbox and room_snapshots (one
// MemDB for the room domain; other domains such as wallet or notices build
// their own MemDB in their own files of this package). The hot tables,
// room_command_log, room_outbox and the directory's, are not go-memdb
// tables but maps, slices and B-trees under a lock (commandlog.go,
// outboxtable.go, directory.go): they change on every command, and
// go-memdb's copy-on-write radix trees made that most of a dev-mode
// command's cost.
// Nothing survives the process, so it gives no durability, only the same
// transactional and fencing semantics as the MySQL store, checked by
// persistence/storetest. It must not import actor, delivery or gRPC
// packages, and it never hands out a stored object: every value in or out
// is deep-copied, and a stored row is never mutated (an update stores a
// new one in its place).
package memdb
