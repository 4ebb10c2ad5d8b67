// Package backend opens the configured store backend (store.kind: memdb or
// mysql) for every store contract a process needs, in one place: the room
// store, the wallet store when the wallet runs in process, and the notice
// store with the owner-outbox readers when the notice role runs. A new
// backend is one more case here, not one per store in cmd.
//
// It is a package rather than a function in cmd/roomcell so that tools and
// tests (roomctl bench, end-to-end tests) open stores exactly as the server
// does. It imports configs and the backend packages only, never actors/;
// which stores a process wants is the caller's decision (Want), not this
// package's.
package backend
