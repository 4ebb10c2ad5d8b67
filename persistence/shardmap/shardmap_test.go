package shardmap

import (
	"fmt"
	"testing"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/ownership"
	"github.com/hyapp/roomcell/persistence"
)

// A room's database is the one its shard is mapped to: the same shard
// ownership leases, so a room never splits between databases.
func TestIndexFollowsTheRoomsShard(t *testing.T) {
	c, err := configs.Parse([]byte(`store: {kind: mysql}
cluster: {shards: 64}
mysql:
  dsn: "root@tcp(127.0.0.1:3306)/"
  room_dbs: {b: {dsn: "root@tcp(127.0.0.1:3307)/"}}
  room_shards: {default: ["0-31"], b: ["32-63"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	rm, err := c.RoomShardMap()
	if err != nil {
		t.Fatal(err)
	}
	m := New(rm)
	if m.Len() != 2 || m.Key(0) != "default" || m.Key(1) != "b" {
		t.Fatalf("keys %v", rm.Keys)
	}
	count := [2]int{}
	for i := range 2000 {
		k := persistence.RoomKey{AppCode: "app", RoomID: fmt.Sprint("r", i)}
		id := k.AppCode + "/" + k.RoomID
		shard := ownership.ShardOf(id, 64)
		want := 0
		if shard >= 32 {
			want = 1
		}
		if got := m.IndexOf(k); got != want || m.Index(id) != want || m.Shard(k) != shard {
			t.Fatalf("room %s shard %d: database %d, want %d", id, shard, got, want)
		}
		count[want]++
	}
	if count[0] < 800 || count[1] < 800 {
		t.Fatalf("rooms per database %v: the hash does not spread them", count)
	}
	if s := Single(64); s.Len() != 1 || s.IndexOf(persistence.RoomKey{AppCode: "a", RoomID: "x"}) != 0 {
		t.Fatal("single map")
	}
}
