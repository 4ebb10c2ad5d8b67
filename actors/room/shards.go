package room

import (
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
)

// ShardedGrainProps is GrainProps over several room databases: a room
// uses stores[pick(identity)], chosen once when it starts (a shard does
// not change database while the process runs). Each database has its
// own mark batcher and its own event-read slots, so a database that
// hangs holds up only its own rooms' marks and log reads: with one
// batcher, a flush stuck on the paused database held every other room's
// marks behind it. The rest (directory, joins, watch feeds, seat
// timers) stays one per node; each database has its own store gate
// (storegate.go) too. d.Store is ignored; stores must not be
// empty and pick must return an index into it.
func ShardedGrainProps(d Deps, stores []Store, pick func(identity string) int) *actor.Props {
	d.setDefaults()
	d.dir = &sharedDir{}
	per := make([]*Deps, len(stores))
	for i, s := range stores {
		c := d
		c.Store = s
		c.marks = newMarkBatcher(s, c.Clock, c.Config.StoreTimeout, c.Logger, c.NodeID)
		c.reads = make(chan struct{}, eventReads)
		// A gate per database: one that stops answering refuses only its
		// own rooms' writes.
		c.store = newStoreGate(s, c.Config.StoreTimeout, c.Logger.With("component", "room", "room_db", strconv.Itoa(i)))
		per[i] = &c
	}
	// Before its ClusterInit a grain reads the first database's Deps;
	// nothing it does then touches a store.
	base := *per[0]
	base.pick = func(identity string) *Deps { return per[pick(identity)] }
	return grainProps(&base)
}
