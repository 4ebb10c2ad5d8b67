package roomgrain

import (
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
)

// ShardDB is one room database of ShardedGrainProps: its store and the
// publish metrics of its rooms (labelled with the database, like its
// relay's).
type ShardDB struct {
	Store          Store
	PublishMetrics *PublishMetrics
	// Name is the database's key in the shard map, for refusals and
	// logs ("" = its index).
	Name string
	// Attached, when set, says whether the store may be used yet: false
	// while a database that was unreachable at start has not come back
	// (and been migrated); its rooms' commands are refused at once
	// meanwhile, naming the database.
	Attached func() bool
}

// ShardedGrainProps is GrainProps over several room databases: a room
// uses dbs[pick(identity)], chosen once when it starts (a shard does
// not change database while the process runs). Each database has its
// own mark batcher, so a database that hangs holds up only its own
// rooms' marks: with one batcher, a flush stuck on the paused database
// held every other room's marks behind it. The rest (observers, joins)
// stays one per node; each database has its own store gate
// (storegate.go) too. d.Store is ignored; dbs must not be empty
// and pick must return an index into it.
func ShardedGrainProps(d Deps, dbs []ShardDB, pick func(identity string) int) *actor.Props {
	d.setDefaults()
	per := make([]*Deps, len(dbs))
	for i, db := range dbs {
		s := db.Store
		c := d
		c.Store = s
		if db.PublishMetrics != nil {
			c.PublishMetrics = db.PublishMetrics
		}
		c.marks = newMarkBatcher(s, c.Clock, c.Config.StoreTimeout, c.Logger, c.NodeID)
		// A gate per database: one that stops answering refuses only its
		// own rooms' writes.
		name := db.Name
		if name == "" {
			name = strconv.Itoa(i)
		}
		c.store = newStoreGate(s, c.Config.StoreTimeout, c.Logger.With("component", "room", "room_db", name))
		c.store.forDatabase(name, db.Attached)
		per[i] = &c
	}
	// Before its ClusterInit a grain reads the first database's Deps;
	// nothing it does then touches a store.
	base := *per[0]
	base.pick = func(identity string) *Deps { return per[pick(identity)] }
	return grainProps(&base)
}
