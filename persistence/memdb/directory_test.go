package memdb

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

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

// The counted ranking agrees with a walk of the listing after every write:
// random heats (ties included), re-ranks, removals and expiries.
func TestDirectoryRankMatchesListing(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	d := NewDirectory(DirectoryOptions{RoomTTL: time.Minute, Clock: func() time.Time { return now }})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	position := func(room string) int64 {
		page, err := d.ListRooms(ctx, "app", 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Rooms {
			if e.RoomID == room {
				return e.Rank
			}
		}
		return 0
	}
	for i := range 3000 {
		room := fmt.Sprint("r", rng.IntN(150))
		switch {
		case rng.IntN(20) == 0:
			if err := d.RemoveRoom(ctx, persistence.RoomKey{AppCode: "app", RoomID: room}); err != nil {
				t.Fatal(err)
			}
			continue
		case rng.IntN(50) == 0:
			now = now.Add(time.Duration(rng.IntN(40)) * time.Second) // some rows expire
		}
		prev := position(room)
		rc, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: room, Heat: int64(rng.IntN(30))})
		if err != nil {
			t.Fatal(err)
		}
		if want := (persistence.RankChange{Prev: prev, Rank: position(room)}); rc != want {
			t.Fatalf("write %d of %s: rank change %+v, the listing says %+v", i, room, rc, want)
		}
	}
}

// Rooms of one app updated from many goroutines: the ranking tree is only
// touched under the MemDB's writer lock (the race detector checks), and
// afterwards every room's rank is its place in the listing.
func TestDirectoryConcurrentUpdatesRankConsistently(t *testing.T) {
	d := NewDirectory(DirectoryOptions{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				room := fmt.Sprint("r", (g*7+i)%40)
				if _, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: room, Heat: int64((g + i) % 13)}); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					_ = d.RemoveRoom(ctx, persistence.RoomKey{AppCode: "app", RoomID: room})
				}
			}
		}()
	}
	wg.Wait()
	page, err := d.ListRooms(ctx, "app", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Rooms {
		rc, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app", RoomID: e.RoomID, Heat: e.Heat})
		if err != nil || rc.Prev != e.Rank || rc.Rank != e.Rank {
			t.Fatalf("%s listed at %d, rewrite says %+v %v", e.RoomID, e.Rank, rc, err)
		}
	}
}

// A room's presence walk (StalePresence, SyncRoom) reads that room only,
// not the rooms whose id extends its own (r1 → r10, r1x): the presence
// index's prefix lookup used to read the room id as a string prefix.
func TestPresenceWalkStaysInItsRoom(t *testing.T) {
	ctx := context.Background()
	d := NewDirectory(DirectoryOptions{})
	r1 := persistence.RoomKey{AppCode: "app", RoomID: "r1"}
	others := []persistence.RoomKey{{AppCode: "app", RoomID: "r10"}, {AppCode: "app", RoomID: "r1x"}, {AppCode: "app2", RoomID: "r1"}}
	if err := d.Heartbeat(ctx, r1, "in-r1", 5); err != nil {
		t.Fatal(err)
	}
	for i, k := range others {
		if err := d.Heartbeat(ctx, k, fmt.Sprint("in-", k.AppCode, "-", k.RoomID), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	stale, err := d.StalePresence(ctx, r1, 100, 10)
	if err != nil || len(stale) != 1 || stale[0].UserID != "in-r1" {
		t.Fatalf("StalePresence of r1: %+v %v, want in-r1 only", stale, err)
	}
	// r1 synced with no members drops its own presence and no one else's.
	if _, _, err := d.SyncRoom(ctx, persistence.RoomSync{Entry: persistence.RoomEntry{AppCode: "app", RoomID: "r1"}, NowMs: 50}); err != nil {
		t.Fatal(err)
	}
	if stale, _ := d.StalePresence(ctx, r1, 100, 10); len(stale) != 0 {
		t.Fatalf("r1 after a sync without members: %+v", stale)
	}
	for i, k := range others {
		stale, err := d.StalePresence(ctx, k, 100, 10)
		if err != nil || len(stale) != 1 || stale[0].LastSeenMs != int64(i) {
			t.Fatalf("%s after r1's sync: %+v %v, want its one user", k, stale, err)
		}
	}
}

// The listing comes from the ranking and expiry trees, so it is checked
// against a model kept apart from them: every live room (updated less than
// the TTL ago, not removed) once, heat descending then room id, with
// Total counting them; pages at random offsets are slices of it.
func TestDirectoryListingMatchesAModel(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	const ttl = time.Minute
	d := NewDirectory(DirectoryOptions{RoomTTL: ttl, Clock: func() time.Time { return now }})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 13))
	type modelRoom struct {
		heat      int64
		expiresAt time.Time
	}
	model := map[persistence.RoomKey]modelRoom{}
	apps := []string{"app", "app2"}
	for i := range 4000 {
		key := persistence.RoomKey{AppCode: apps[rng.IntN(2)], RoomID: fmt.Sprint("r", rng.IntN(120))}
		switch op := rng.IntN(40); {
		case op == 0:
			if err := d.RemoveRoom(ctx, key); err != nil {
				t.Fatal(err)
			}
			delete(model, key)
		case op < 3:
			now = now.Add(time.Duration(rng.IntN(30_000)) * time.Millisecond)
		default:
			heat := int64(rng.IntN(25))
			if _, err := d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: key.AppCode, RoomID: key.RoomID, Heat: heat}); err != nil {
				t.Fatal(err)
			}
			model[key] = modelRoom{heat: heat, expiresAt: now.Add(ttl)}
		}
		if i%9 != 0 {
			continue
		}
		app := apps[rng.IntN(2)]
		var want []persistence.RoomEntry
		for k, m := range model {
			if k.AppCode == app && now.Before(m.expiresAt) {
				want = append(want, persistence.RoomEntry{RoomID: k.RoomID, Heat: m.heat})
			}
		}
		slices.SortFunc(want, func(a, b persistence.RoomEntry) int {
			return cmp.Or(cmp.Compare(b.Heat, a.Heat), cmp.Compare(a.RoomID, b.RoomID))
		})
		offset, limit := rng.IntN(len(want)+2), 1+rng.IntN(40)
		page, err := d.ListRooms(ctx, app, offset, limit)
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != int64(len(want)) {
			t.Fatalf("step %d: total %d, the model has %d live rooms", i, page.Total, len(want))
		}
		want = want[min(offset, len(want)):min(offset+limit, len(want))]
		if len(page.Rooms) != len(want) {
			t.Fatalf("step %d: page at %d of %d rooms: %+v, want %+v", i, offset, limit, page.Rooms, want)
		}
		for j, e := range page.Rooms {
			if e.RoomID != want[j].RoomID || e.Heat != want[j].Heat || e.Rank != int64(offset+j+1) {
				t.Fatalf("step %d: rank %d is %s (heat %d, rank %d), want %s (heat %d)", i, offset+j+1, e.RoomID, e.Heat, e.Rank, want[j].RoomID, want[j].Heat)
			}
		}
	}
}

// The directory's B-tree orders read field by field agree with the
// lexicographic order of all fields on random rows (few distinct values,
// so rows tie on leading fields often).
func TestDirectoryOrdersAreLexicographic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(vals ...string) string { return vals[r.IntN(len(vals))] }
	for range 20000 {
		a := &presenceRow{AppCode: pick("a", "b"), RoomID: pick("r", "r1", ""), UserID: pick("u", "v"), LastSeenMs: int64(r.IntN(3))}
		b := &presenceRow{AppCode: pick("a", "b"), RoomID: pick("r", "r1", ""), UserID: pick("u", "v"), LastSeenMs: int64(r.IntN(3))}
		// seenLess orders one room's set: the room is the set's key.
		want := cmp.Or(cmp.Compare(a.LastSeenMs, b.LastSeenMs), cmp.Compare(a.UserID, b.UserID)) < 0
		if got := seenLess(a, b); got != want {
			t.Fatalf("seenLess(%+v, %+v) = %v, want %v", a, b, got, want)
		}
		x := expiryItem{atMs: int64(r.IntN(3)), appCode: pick("a", "b"), room: pick("r", "s")}
		y := expiryItem{atMs: int64(r.IntN(3)), appCode: pick("a", "b"), room: pick("r", "s")}
		wantE := cmp.Or(cmp.Compare(x.atMs, y.atMs), cmp.Compare(x.appCode, y.appCode), cmp.Compare(x.room, y.room)) < 0
		if got := expiryLess(x, y); got != wantE {
			t.Fatalf("expiryLess(%+v, %+v) = %v, want %v", x, y, got, wantE)
		}
	}
}

// A listed room's row is its entry and expiry: 112 bytes, a size class
// of Go's allocator that every listed room pays.
func TestDirectoryRoomRowFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(roomRow{}); n > 112 {
		t.Fatalf("roomRow is %d bytes, over the 112-byte size class", n)
	}
	row := &roomRow{Entry: persistence.RoomEntry{AppCode: "a", RoomID: "r", Heat: 7}, ExpiresAtMs: 9}
	if it := itemOf(row); it.negHeat != -7 || it.roomID != "r" {
		t.Fatalf("rank item %+v, want heat -7 of r", it)
	}
	if it := expiryOf(row); it.atMs != 9 || it.appCode != "a" || it.room != "r" {
		t.Fatalf("expiry item %+v, want a/r at 9", it)
	}
}

// The per-room presence sets hold exactly the presence rows, each in its
// room's set by (last_seen_ms, user_id), and a room without presence keeps
// no set: random heartbeats, joins (which move a user between rooms),
// clears and syncs, checked after every step against the presence map.
func TestPresenceSetsHoldExactlyThePresence(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 11))
	d := NewDirectory(DirectoryOptions{})
	rooms := []persistence.RoomKey{{AppCode: "a", RoomID: "r1"}, {AppCode: "a", RoomID: "r2"}, {AppCode: "b", RoomID: "r1"}}
	users := []string{"u1", "u2", "u3", "u4"}
	for step := range 2000 {
		key, user, at := rooms[r.IntN(len(rooms))], users[r.IntN(len(users))], int64(r.IntN(50))
		var err error
		switch r.IntN(4) {
		case 0:
			err = d.Heartbeat(ctx, key, user, at)
		case 1:
			_, err = d.SetUserRoom(ctx, key, user, at)
		case 2:
			err = d.ClearUserRoom(ctx, key, user)
		default:
			members := map[string]int64{}
			for _, u := range users {
				if r.IntN(2) == 0 {
					members[u] = at
				}
			}
			_, _, err = d.SyncRoom(ctx, persistence.RoomSync{Entry: persistence.RoomEntry{AppCode: key.AppCode, RoomID: key.RoomID}, Members: members, NowMs: at})
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		d.mu.RLock()
		want := map[persistence.RoomKey][]*presenceRow{}
		for k, p := range d.presence {
			if k != (presenceKey{p.AppCode, p.RoomID, p.UserID}) {
				t.Fatalf("step %d: presence %v holds %+v", step, k, p)
			}
			rk := persistence.RoomKey{AppCode: p.AppCode, RoomID: p.RoomID}
			want[rk] = append(want[rk], p)
		}
		if len(d.seen) != len(want) {
			t.Fatalf("step %d: %d room sets, %d rooms with presence", step, len(d.seen), len(want))
		}
		for rk, rows := range want {
			slices.SortFunc(rows, func(a, b *presenceRow) int {
				return cmp.Or(cmp.Compare(a.LastSeenMs, b.LastSeenMs), cmp.Compare(a.UserID, b.UserID))
			})
			var got []*presenceRow
			if set := d.seen[rk]; set != nil {
				set.tree.Scan(func(p *presenceRow) bool {
					got = append(got, p)
					return true
				})
			}
			// The very rows, not equal ones: a stale entry would be found
			// by its old last-seen.
			if !slices.Equal(got, rows) {
				t.Fatalf("step %d: room %v's set holds %+v, want %+v", step, rk, got, rows)
			}
		}
		d.mu.RUnlock()
	}
}
