package backend_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/backend"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// secondDSN is the second MariaDB deploy/local/services.sh starts (:3307),
// or $ROOMCELL_TEST_MYSQL_DSN2.
func secondDSN() string {
	if dsn := os.Getenv("ROOMCELL_TEST_MYSQL_DSN2"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3307)/"
}

// With a shard map Open opens a room store per database, in the map's
// order, each on its own database (here on the second server of
// services.sh): a room appended through its shard's store is found there
// and not in the other, and the notice workers' room_outbox scan reads
// both.
func TestOpenOpensARoomStorePerDatabaseOfTheMap(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var cfg configs.Config
	cfg.Store.Kind = configs.StoreMySQL
	cfg.Cluster.Shards = 1024
	cfg.MySQL, _ = mysqltest.NewDatabase(t)
	_, dbB := mysqltest.NewDatabaseOn(t, secondDSN())
	cfg.MySQL.RoomDBs = map[string]configs.RoomDB{"b": {DSN: secondDSN(), Database: dbB}}
	cfg.MySQL.RoomShards = map[string][]string{"default": {"0-511"}, "b": {"512-1023"}}
	s, err := backend.Open(ctx, cfg, backend.Want{Notice: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Rooms) != 2 || s.Room != s.Rooms[0] || s.RoomShards.Len() != 2 || s.RoomShards.Key(1) != "b" {
		t.Fatalf("rooms %d, map %d", len(s.Rooms), s.RoomShards.Len())
	}
	perDB := [2]int{}
	for _, room := range []string{"r1", "r2", "r3", "r4", "r5", "r6"} {
		k := persistence.RoomKey{AppCode: "app", RoomID: room}
		i := s.RoomShards.IndexOf(k)
		perDB[i]++
		now := time.Now().UnixMilli()
		kick := persistence.Envelope{EventID: "app:" + room + ":1:0", EventType: "RoomUserKicked", AppCode: "app", RoomID: room, RoomSeq: 1,
			CommandID: "c1", CreatedAtMs: now, Payload: []byte(`{"target_user_id":"u"}`)}
		a := persistence.Append{Command: persistence.CommandRecord{AppCode: k.AppCode, RoomID: k.RoomID, Seq: 1,
			CommandID: "c1", CommandType: "KickUser", Reply: []byte("{}"), Events: []persistence.Envelope{kick}, CreatedAtMs: now}}
		if err := s.Rooms[i].Append(ctx, a); err != nil {
			t.Fatalf("append %s to %s: %v", room, s.RoomShards.Key(i), err)
		}
		for j, st := range s.Rooms {
			recs, err := st.LoadCommands(ctx, k, 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[i == j]; len(recs) != want {
				t.Fatalf("room %s (database %s): %d commands in %s", room, s.RoomShards.Key(i), len(recs), s.RoomShards.Key(j))
			}
		}
	}
	if perDB[0] == 0 || perDB[1] == 0 {
		t.Fatalf("rooms per database %v: the test needs both", perDB)
	}
	// The notice workers' room_outbox scan reads both databases as one.
	rows, err := s.RoomOutbox.RoomOutboxAfter(ctx, "RoomUserKicked", 0, "", 100)
	if err != nil || len(rows) != 6 {
		t.Fatalf("room_outbox scan over both databases: %d rows (%v), want the 6 kicks", len(rows), err)
	}
}
