package roomgrain

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/outboxmarks"
	"github.com/hyapp/roomcell/actors/storegate"
)

// ShardDB is one room database of ShardedGrainProps: its store, its
// gate (made by the node's wiring, one per database, so one that stops
// answering refuses only its own rooms' writes; nil: none) and the
// publish metrics of its rooms (labelled with the database, like its
// relay's).
type ShardDB struct {
	Store     Store
	StoreGate *storegate.Gate
	// Marks batches the marks of the database's rooms (nil: each room
	// its own): one per database, so a database that hangs holds up only
	// its own rooms' marks.
	Marks          *outboxmarks.Batcher
	PublishMetrics *PublishMetrics
}

// ShardedGrainProps is GrainProps over several room databases: a room
// uses dbs[pick(identity)], chosen once when it starts (a shard does
// not change database while the process runs). Each database has its
// own mark batcher (ShardDB.Marks), so a database that hangs holds up
// only its own rooms' marks: with one batcher, a flush stuck on the
// paused database held every other room's marks behind it. The rest
// (observers, joins) stays one per node. d.Store, d.StoreGate and
// d.Marks are ignored; dbs must not be empty and pick must return an
// index into it.
func ShardedGrainProps(d Deps, dbs []ShardDB, pick func(identity string) int) *actor.Props {
	d.setDefaults()
	per := make([]*Deps, len(dbs))
	for i, db := range dbs {
		s := db.Store
		c := d
		c.Store, c.StoreGate = s, db.StoreGate
		if db.PublishMetrics != nil {
			c.PublishMetrics = db.PublishMetrics
		}
		c.Marks = db.Marks
		per[i] = &c
	}
	// Before its ClusterInit a grain reads the first database's Deps;
	// nothing it does then touches a store.
	base := *per[0]
	base.pick = func(identity string) *Deps { return per[pick(identity)] }
	return grainProps(&base)
}
