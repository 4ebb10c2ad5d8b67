// Package shardmap says which room database holds a room: the room's
// virtual shard (ownership.ShardOf over cluster.shards, the same shard
// its lease is on) indexes the configured shard map (mysql.room_dbs,
// mysql.room_shards; configs.RoomShardMap). Every node computes the same
// answer from the same configuration. It holds no stores: the process
// opens one per database and indexes them with Index.
package shardmap
