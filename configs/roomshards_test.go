package configs

import (
	"os"
	"testing"
)

const shardBase = "store: {kind: mysql}\ncluster: {shards: 16}\nmysql:\n  dsn: \"root@tcp(127.0.0.1:3306)/\"\n"

// A configuration without a shard map loads as before: every shard on
// mysql.dsn.
func TestRoomShardMapDefaultIsEveryShardOnTheDSN(t *testing.T) {
	for _, file := range []string{shardBase, "store: {kind: memdb}\n"} {
		c, err := Parse([]byte(file))
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.RoomShardMap()
		if err != nil {
			t.Fatal(err)
		}
		if !m.Single() || m.Keys[0] != DefaultRoomDB || m.Configs[0].DSN != c.MySQL.DSN || m.Configs[0].RoomDatabase != c.MySQL.RoomDatabase {
			t.Fatalf("default map %+v", m)
		}
		for s, o := range m.Owner {
			if o != 0 {
				t.Fatalf("shard %d on %d", s, o)
			}
		}
	}
	// The shipped example file still loads, with the one map.
	b, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MYSQL_PASSWORD", "x")
	c, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.RoomShardMap(); err != nil || !m.Single() {
		t.Fatalf("config.yaml: %+v, %v", m, err)
	}
}

func TestRoomShardMapSplitsShards(t *testing.T) {
	c, err := Parse([]byte(shardBase + `  room_database: rooms
  room_dbs:
    b: {dsn: "root@tcp(127.0.0.1:3307)/"}
    c: {dsn: "root@tcp(127.0.0.1:3306)/", database: rooms_c}
  room_shards:
    default: ["0-7"]
    b: ["8-11", "15"]
    c: ["12-14"]
`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.RoomShardMap()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Keys) != 3 || m.Keys[0] != "default" || m.Keys[1] != "b" || m.Keys[2] != "c" {
		t.Fatalf("keys %v", m.Keys)
	}
	if m.Configs[1].DSN != "root@tcp(127.0.0.1:3307)/" || m.Configs[1].RoomDatabase != "rooms" {
		t.Fatalf("b: dsn %q database %q", m.Configs[1].DSN, m.Configs[1].RoomDatabase)
	}
	if m.Configs[2].DSN != c.MySQL.DSN || m.Configs[2].RoomDatabase != "rooms_c" {
		t.Fatalf("c: database %q", m.Configs[2].RoomDatabase)
	}
	want := []int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 1}
	for s := range want {
		if m.Owner[s] != want[s] {
			t.Fatalf("owner %v, want %v", m.Owner, want)
		}
	}
}

// Every mistake in the map refuses the configuration, naming the key: a
// shard in no database or in two would lose or fork its rooms.
func TestRoomShardMapFailsClosed(t *testing.T) {
	b := "  room_dbs:\n    b: {dsn: \"root@tcp(127.0.0.1:3307)/\"}\n"
	for _, tc := range []struct {
		name, file, key, want string
	}{
		{"shard in no database", b + "  room_shards:\n    default: [\"0-7\"]\n    b: [\"8-14\"]\n", "mysql.room_shards", "shards 15 are in no database"},
		{"shard twice", b + "  room_shards:\n    default: [\"0-8\"]\n    b: [\"8-15\"]\n", "mysql.room_shards.b[0]", `shard 8 is already in "default"`},
		{"unknown key named", b + "  room_shards:\n    default: [\"0-7\"]\n    b: [\"8-11\"]\n    bb: [\"12-15\"]\n    zz: [\"1\"]\n", "mysql.room_shards", "unknown database key(s) bb, zz (known: default, b)"},
		{"database with no shard", "  room_dbs:\n    b: {dsn: \"x@tcp(h:1)/\"}\n    c: {dsn: \"y@tcp(h:1)/\"}\n  room_shards:\n    default: [\"0-7\"]\n    b: [\"8-15\"]\n", "mysql.room_dbs.c", "holds no shard"},
		{"dbs without shards", b, "mysql.room_shards", "required with mysql.room_dbs"},
		{"out of range", b + "  room_shards:\n    default: [\"0-7\"]\n    b: [\"8-16\"]\n", "mysql.room_shards.b[0]", "not a range within 0-15"},
		{"reversed", b + "  room_shards:\n    default: [\"0-7\"]\n    b: [\"15-8\"]\n", "mysql.room_shards.b[0]", "not a range"},
		{"not a number", b + "  room_shards:\n    default: [\"0-7\"]\n    b: [\"eight-15\"]\n", "mysql.room_shards.b[0]", "want a shard or a range"},
		{"empty list", b + "  room_shards:\n    default: [\"0-15\"]\n    b: []\n", "mysql.room_shards.b", "empty"},
		{"no dsn", "  room_dbs:\n    b: {database: x}\n  room_shards:\n    default: [\"0-7\"]\n    b: [\"8-15\"]\n", "mysql.room_dbs.b.dsn", "required"},
		{"default as a db key", "  room_dbs:\n    default: {dsn: \"x@tcp(h:1)/\"}\n  room_shards:\n    default: [\"0-15\"]\n", "mysql.room_dbs.default", "mysql.dsn's key"},
		{"same database twice", "  room_dbs:\n    b: {dsn: \"root@tcp(127.0.0.1:3306)/\"}\n  room_shards:\n    default: [\"0-7\"]\n    b: [\"8-15\"]\n", "mysql.room_dbs.b", `same server and database as "default"`},
		{"shards of another cluster size", b + "  room_shards:\n    default: [\"0-511\"]\n    b: [\"512-1023\"]\n", "mysql.room_shards.default[0]", "not a range within 0-15"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(shardBase + tc.file))
			wantKey(t, tc.name, err, tc.key, tc.want)
		})
	}
	// A map with the in-memory store has nowhere to put a shard.
	_, err := Parse([]byte("store: {kind: memdb}\nmysql:\n" + b + "  room_shards:\n    b: [\"0-1023\"]\n"))
	wantKey(t, "memdb", err, "mysql.room_shards", "needs store.kind mysql")
	// A misspelt key of the map is an unknown key, as everywhere.
	_, err = Parse([]byte(shardBase + "  room_dbs:\n    b: {dns: \"x@tcp(h:1)/\"}\n"))
	wantKey(t, "misspelt", err, "mysql.room_dbs.b.dns", "")
}
