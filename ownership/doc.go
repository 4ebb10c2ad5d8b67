// Package ownership decides which node may serve a room: rooms hash into a
// fixed set of virtual shards, each shard is owned by one node under a
// lease with an epoch that rises on every takeover, and a node serves a
// room only while it holds the room's shard (Table.Hold). The epoch is
// what the room store fences appends with (persistence.Append.Epoch).
//
// Two tables: Etcd (production: a short liveness lease per node decides
// who may serve, a long hold lease keeps its shard keys through an etcd
// outage; epochs are etcd revisions) and View (single-node and
// automanaged clusters: shards follow the member view, epoch 0, no lease
// and so no fencing). See docs/cluster.md for why etcd and not MySQL.
//
// It knows nothing of actors, grains or stores: cluster/ routes and
// activates by it, actors/roomgrain gates answers by it.
package ownership
