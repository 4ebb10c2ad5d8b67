// Package storetest holds the contract suites every store backend must
// pass: RunRoomStore for persistence.Store (room command log, outbox,
// snapshots). A backend's own test calls the suite with a factory of empty
// stores; the suite uses only the persistence interfaces, passes every time
// value as an argument (no sleeps, no clock) and knows nothing of any
// backend. It must not import a backend package, and it never talks to a
// server itself: the factory owns connections, databases and cleanup.
package storetest
