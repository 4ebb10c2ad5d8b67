// Package roomfeed is the room's feed: what clients read of a room's
// event log (ListRoomEvents) and follow (WatchRoom), attached to each
// room as an observer (roomgrain.Observer), so the grain keeps the
// command log and knows nothing of who reads it.
//
// A node makes one Feed (New) and lists its Observe in the room grains'
// observers (cmd/roomcell). Each activation's observer answers, on the
// room's goroutine, the messages the feed owns (the grain hands them
// over as roomgrain.Receiver): a read near the head from the room's
// event tail of ready-built, ready-encoded events (eventtail.go), one
// further back from the store off the mailbox (events.go); a feed's
// subscription, to which it pushes every stored command's events
// (roomgrain.Recorder). Watcher (watch.go) serves WatchRoom on a node:
// one feed per room for all its watchers, each filling any gap from the
// log, so a lost push costs a read, never a gap. Client reaches the
// room's owner wherever the cluster placed it (through roomgrain.Client).
//
// The grain must not import this package (internal/layers).
package roomfeed
