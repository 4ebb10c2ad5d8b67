package shardmap

import (
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/ownership"
	"github.com/hyapp/roomcell/persistence"
)

// Map is a resolved shard map.
type Map struct {
	keys  []string
	owner []int // shard → index into keys
}

// New returns the map of m (from configs.Config.RoomShardMap).
func New(m configs.RoomShardMap) *Map {
	return &Map{keys: m.Keys, owner: m.Owner}
}

// Single is a map of one database (shards = the number of shards).
func Single(shards int) *Map {
	return &Map{keys: []string{configs.DefaultRoomDB}, owner: make([]int, max(shards, 1))}
}

// Len is the number of databases.
func (m *Map) Len() int { return len(m.keys) }

// Key is database i's key in the configuration ("default" is mysql.dsn's).
func (m *Map) Key(i int) string { return m.keys[i] }

// Index is the database of a room identity ("<app_code>/<room_id>").
func (m *Map) Index(identity string) int {
	if len(m.keys) == 1 {
		return 0 // no hash for the common case
	}
	return m.owner[ownership.ShardOf(identity, len(m.owner))]
}

// IndexOf is the database of key.
func (m *Map) IndexOf(key persistence.RoomKey) int {
	if len(m.keys) == 1 {
		return 0
	}
	return m.Index(key.AppCode + "/" + key.RoomID)
}

// Shard is the virtual shard of key, for logs and tools.
func (m *Map) Shard(key persistence.RoomKey) int {
	return ownership.ShardOf(key.AppCode+"/"+key.RoomID, len(m.owner))
}
