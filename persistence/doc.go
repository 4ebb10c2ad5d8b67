// Package persistence defines what roomcell stores and the contracts every
// store backend implements: the room command log, the transactional room
// outbox and room snapshots (RoomStore, OutboxStore), with the error classes
// callers branch on (ErrConflict, ErrUnavailable, ErrNotFound).
//
// The implementations live in sub-packages: memdb (go-memdb, the embedded
// default for dev mode and fast tests), mysql (production) and redis (the
// room directory). storetest holds the one contract suite both room store
// backends must pass. This package holds no I/O and must not import an
// actor, delivery or gRPC package.
package persistence
