package redis

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/redis/redistest"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func TestDirectoryContract(t *testing.T) {
	storetest.RunDirectory(t, func(t *testing.T) persistence.Directory {
		d := Open(redistest.Config(t, ""), Options{})
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// Every key lives under the prefix and carries the TTL its role needs:
// the presence entry and a room's entry expire, the presence set, the
// user → room entry and the ranking do not (they are repaired, not aged).
func TestDirectoryKeysAndTTLs(t *testing.T) {
	cfg := redistest.Config(t, "")
	d := Open(cfg, Options{PresenceTTL: time.Minute, RoomTTL: 2 * time.Minute})
	defer d.Close()
	ctx := context.Background()
	key := persistence.RoomKey{AppCode: "app", RoomID: "r1"}
	if _, err := d.SetUserRoom(ctx, key, "u1", 100); err != nil {
		t.Fatal(err)
	}
	if _, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: "r1", Heat: 3}); err != nil {
		t.Fatal(err)
	}
	p := cfg.KeyPrefix
	for k, want := range map[string]time.Duration{
		p + "pr:app:r1:u1": time.Minute,
		p + "pz:app:r1":    -1,
		p + "ur:app:u1":    -1,
		p + "rm:app:r1":    2 * time.Minute,
		p + "rk:app":       -1,
	} {
		ttl, err := d.c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want < 0 && ttl != -1 || want > 0 && (ttl <= 0 || ttl > want) {
			t.Fatalf("%s: ttl %s, want %s (-1 = none)", k, ttl, want)
		}
	}
	n, err := redistest.CountPrefix(ctx, d.c, p)
	if err != nil || n != 5 {
		t.Fatalf("%d keys under the prefix (%v), want 5", n, err)
	}
}

// A room whose entry expired (its node died) is purged from the ranking
// by the reader that meets it, and the page is filled from the next ones.
func TestListRoomsPurgesExpiredEntries(t *testing.T) {
	d := Open(redistest.Config(t, ""), Options{})
	defer d.Close()
	ctx := context.Background()
	for i := range 5 {
		if _, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: fmt.Sprintf("r%d", i), Heat: int64(100 - i)}); err != nil {
			t.Fatal(err)
		}
	}
	// r0 and r1 "expire".
	if err := d.c.Del(ctx, d.roomKey("app", "r0"), d.roomKey("app", "r1")).Err(); err != nil {
		t.Fatal(err)
	}
	page, err := d.ListRooms(ctx, "app", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Rooms) != 2 || page.Rooms[0].RoomID != "r2" || page.Rooms[0].Rank != 1 || page.Rooms[1].RoomID != "r3" {
		t.Fatalf("page %+v, want r2, r3 from rank 1", page)
	}
	if page.Total != 3 {
		t.Fatalf("total %d after the purge, want 3", page.Total)
	}
}

// With the server gone every call fails fast with ErrUnavailable (one
// dial attempt, bounded by the timeout), and the same directory works
// again once a server is back, with its scripts reloaded.
func TestDirectoryOutageAndRecovery(t *testing.T) {
	srv := redistest.StartServer(t)
	cfg := redistest.Config(t, srv.Addr)
	cfg.Timeout = 300 * time.Millisecond
	d := Open(cfg, Options{})
	defer d.Close()
	ctx := context.Background()
	key := persistence.RoomKey{AppCode: "app", RoomID: "r1"}
	if _, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: "r1", Heat: 1}); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	start := time.Now()
	for _, call := range []func() error{
		func() error { return d.Heartbeat(ctx, key, "u1", 1) },
		func() error { _, err := d.SetUserRoom(ctx, key, "u1", 1); return err },
		func() error {
			_, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: "r1"})
			return err
		},
		func() error {
			_, _, err := d.SyncRoom(ctx, persistence.RoomSync{Entry: persistence.RoomEntry{AppCode: "app", RoomID: "r1"}})
			return err
		},
	} {
		if err := call(); !errors.Is(err, persistence.ErrUnavailable) {
			t.Fatalf("with redis down: %v, want ErrUnavailable", err)
		}
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("four calls against a dead server took %s", el)
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: "r1", Heat: 2})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("directory did not recover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := d.ClearUserRoom(ctx, key, "u1"); err != nil { // EVALSHA of a script the new server never saw
		t.Fatal(err)
	}
	page, err := d.ListRooms(ctx, "app", 0, 10)
	if err != nil || len(page.Rooms) != 1 || page.Rooms[0].Heat != 2 {
		t.Fatalf("after recovery: %+v %v", page, err)
	}
}

// BenchmarkHeartbeat measures heartbeats/s for 100,000 users spread over
// 1,000 rooms on the machine's Redis, from parallel callers (one round
// trip per heartbeat, as the room grains send them).
//
//	go test ./persistence/redis -run '^$' -bench Heartbeat -benchtime 200000x
func BenchmarkHeartbeat(b *testing.B) {
	const usersN, roomsN = 100_000, 1_000
	d := Open(redistest.Config(b, ""), Options{})
	defer d.Close()
	keys := make([]persistence.RoomKey, roomsN)
	for i := range keys {
		keys[i] = persistence.RoomKey{AppCode: "bench", RoomID: fmt.Sprintf("room%04d", i)}
	}
	userIDs := make([]string, usersN)
	for i := range userIDs {
		userIDs[i] = fmt.Sprintf("user%06d", i)
	}
	var next atomic.Int64
	ctx := context.Background()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			u := int(i % usersN)
			if err := d.Heartbeat(ctx, keys[u%roomsN], userIDs[u], 1_000_000+i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
	if n, _ := d.c.ZCard(ctx, d.presenceSetKey(keys[0])).Result(); b.N >= usersN && n != usersN/roomsN {
		b.Fatalf("room0 has %d users in its presence set, want %d", n, usersN/roomsN)
	}
}
