package memdb

import (
	"context"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/storetest"
)

func TestDirectoryContract(t *testing.T) {
	storetest.RunDirectory(t, func(t *testing.T) persistence.Directory {
		d := NewDirectory(DirectoryOptions{})
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// Expiry is the backend's own business (the contract passes no clock):
// the presence entry goes offline and a room drops out of the listing
// once their TTLs pass without a refresh.
func TestDirectoryExpiry(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	d := NewDirectory(DirectoryOptions{PresenceTTL: time.Minute, RoomTTL: 2 * time.Minute, Clock: func() time.Time { return now }})
	ctx := context.Background()
	key := persistence.RoomKey{AppCode: "app", RoomID: "r1"}
	if _, err := d.SetUserRoom(ctx, key, "u1", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: "r1", Heat: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: "r0", Heat: 9}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(90 * time.Second)
	ur, err := d.UserRoom(ctx, "app", "u1")
	if err != nil || ur.Online || ur.LastSeenMs != 10 {
		t.Fatalf("after the presence TTL: %+v %v, want offline, last seen kept", ur, err)
	}
	if stale, _ := d.StalePresence(ctx, key, 10, 10); len(stale) != 1 {
		t.Fatalf("an expired presence entry must still be found stale: %+v", stale)
	}
	if rc, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: "r1", Heat: 5}); err != nil || rc != (persistence.RankChange{Prev: 2, Rank: 2}) {
		t.Fatalf("refresh before the room TTL: %+v %v", rc, err)
	}
	now = now.Add(60 * time.Second) // r0 is 150s old, r1 60s
	page, err := d.ListRooms(ctx, "app", 0, 10)
	if err != nil || page.Total != 1 || len(page.Rooms) != 1 || page.Rooms[0].RoomID != "r1" || page.Rooms[0].Rank != 1 {
		t.Fatalf("after r0's TTL: %+v %v, want only r1 at rank 1", page, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Heartbeat(ctx, key, "u1", 20); err == nil {
		t.Fatal("heartbeat after Close succeeded")
	}
}
