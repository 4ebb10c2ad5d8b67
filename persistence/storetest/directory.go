package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/persistence"
)

// RunDirectory runs the persistence.Directory contract. newDir must return
// an empty directory for each call (its own key prefix on a shared server)
// and arrange teardown with t.Cleanup. Its entry TTLs must be far longer
// than a test: the suite checks semantics, not expiry.
func RunDirectory(t *testing.T, newDir func(t *testing.T) persistence.Directory) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, d persistence.Directory)
	}{
		{"HeartbeatAndStalePresence", testHeartbeatAndStale},
		{"StalePresenceRoomsIsStalePresencePerRoom", testStalePresenceRooms},
		{"HeartbeatNeverMovesBack", testHeartbeatNeverMovesBack},
		{"SetUserRoomSwaps", testSetUserRoomSwaps},
		{"ConcurrentSetUserRoomChain", testConcurrentSetUserRoom},
		{"ClearUserRoomCompareAndDelete", testClearUserRoomCompareAndDelete},
		{"UserRoomPresence", testUserRoomPresence},
		{"UpdateRoomRanks", testUpdateRoomRanks},
		{"ListRoomsPaging", testListRoomsPaging},
		{"RemoveRoom", testRemoveRoom},
		{"ClaimUserRoom", testClaimUserRoom},
		{"ConcurrentClaimsNewestJoinWins", testConcurrentClaims},
		{"SyncRoomRebuildsFromState", testSyncRoom},
		{"AppsIsolated", testDirectoryAppsIsolated},
		{"RoomMetadata", testDirectoryRoomMetadata},
		{"CancelledContext", testDirectoryCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newDir(t))
		})
	}
}

var (
	dirA = persistence.RoomKey{AppCode: "app1", RoomID: "room-a"}
	dirB = persistence.RoomKey{AppCode: "app1", RoomID: "room-b"}
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func users(ps []persistence.Presence) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.UserID
	}
	return out
}

func testHeartbeatAndStale(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	must(t, d.Heartbeat(ctx, dirA, "u1", 100))
	must(t, d.Heartbeat(ctx, dirA, "u2", 200))
	must(t, d.Heartbeat(ctx, dirA, "u3", 300))
	must(t, d.Heartbeat(ctx, dirB, "u9", 50))

	got, err := d.StalePresence(ctx, dirA, 200, 10)
	must(t, err)
	want := []persistence.Presence{{UserID: "u1", LastSeenMs: 100}, {UserID: "u2", LastSeenMs: 200}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stale at 200: %+v, want %+v (inclusive, oldest first, this room only)", got, want)
	}
	if got, _ := d.StalePresence(ctx, dirA, 200, 1); !reflect.DeepEqual(users(got), []string{"u1"}) {
		t.Fatalf("limit 1: %v, want [u1]", users(got))
	}
	must(t, d.Heartbeat(ctx, dirA, "u1", 400))
	if got, _ := d.StalePresence(ctx, dirA, 200, 10); !reflect.DeepEqual(users(got), []string{"u2"}) {
		t.Fatalf("after u1's new heartbeat: %v, want [u2]", users(got))
	}
	if got, _ := d.StalePresence(ctx, dirA, 99, 10); len(got) != 0 {
		t.Fatalf("nobody is older than 99: %+v", got)
	}
	none, err := d.StalePresence(ctx, persistence.RoomKey{AppCode: "app1", RoomID: "empty"}, 1000, 10)
	if err != nil || len(none) != 0 {
		t.Fatalf("room without presence: %+v %v", none, err)
	}
}

// The batched read answers, room by room and in the order asked (a room
// twice, a room of another app, a room without presence), exactly what
// StalePresence answers for each, at every cutoff and limit.
func testStalePresenceRooms(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	other := persistence.RoomKey{AppCode: "app2", RoomID: "room-a"}
	empty := persistence.RoomKey{AppCode: "app1", RoomID: "empty"}
	for i, b := range []struct {
		key  persistence.RoomKey
		user string
		at   int64
	}{{dirA, "u1", 100}, {dirA, "u2", 200}, {dirA, "u3", 300}, {dirB, "u9", 50}, {dirB, "u8", 250}, {other, "u1", 10}} {
		if err := d.Heartbeat(ctx, b.key, b.user, b.at); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	keys := []persistence.RoomKey{dirA, empty, dirB, other, dirA}
	got, err := d.StalePresenceRooms(ctx, keys, 200, 10)
	must(t, err)
	if len(got) != 5 || !slices.Equal(users(got[0]), []string{"u1", "u2"}) || len(got[1]) != 0 ||
		!slices.Equal(users(got[2]), []string{"u9"}) || !slices.Equal(users(got[3]), []string{"u1"}) ||
		!slices.Equal(users(got[4]), []string{"u1", "u2"}) {
		t.Fatalf("stale at 200: %+v, want [u1 u2] [] [u9] [u1] [u1 u2]", got)
	}
	for _, before := range []int64{0, 50, 200, 299, 1000} {
		for _, limit := range []int{1, 2, 10} {
			got, err := d.StalePresenceRooms(ctx, keys, before, limit)
			must(t, err)
			if len(got) != len(keys) {
				t.Fatalf("before %d limit %d: %d answers for %d rooms", before, limit, len(got), len(keys))
			}
			for i, key := range keys {
				want, err := d.StalePresence(ctx, key, before, limit)
				must(t, err)
				if len(got[i]) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got[i], want)) {
					t.Fatalf("before %d limit %d room %v: %+v, StalePresence says %+v", before, limit, key, got[i], want)
				}
			}
		}
	}
	none, err := d.StalePresenceRooms(ctx, nil, 1000, 10)
	if err != nil || len(none) != 0 {
		t.Fatalf("no rooms: %+v %v", none, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.StalePresenceRooms(cctx, keys, 1000, 10); err == nil {
		t.Fatal("a read with a cancelled context succeeded")
	}
}

func testHeartbeatNeverMovesBack(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	must(t, d.Heartbeat(ctx, dirA, "u1", 500))
	must(t, d.Heartbeat(ctx, dirA, "u1", 300)) // a late heartbeat from a slower node
	got, err := d.StalePresence(ctx, dirA, 1000, 10)
	must(t, err)
	if len(got) != 1 || got[0].LastSeenMs != 500 {
		t.Fatalf("presence %+v, want u1 last seen 500", got)
	}
}

func testSetUserRoomSwaps(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	prev, err := d.SetUserRoom(ctx, dirA, "u1", 1000)
	if err != nil || prev != (persistence.UserRoom{}) {
		t.Fatalf("first join: prev %+v %v, want none", prev, err)
	}
	if prev, _ := d.SetUserRoom(ctx, dirA, "u1", 1001); prev != (persistence.UserRoom{}) {
		t.Fatalf("joining the same room again: prev %+v, want none", prev)
	}
	// The replaced entry comes back whole: its join time is what lets a
	// joining room tell an older join it displaces from a newer one.
	want := persistence.UserRoom{AppCode: "app1", UserID: "u1", RoomID: dirA.RoomID, JoinedAtMs: 1001}
	if prev, _ := d.SetUserRoom(ctx, dirB, "u1", 2000); prev != want {
		t.Fatalf("switch to b: prev %+v, want %+v", prev, want)
	}
	ur, err := d.UserRoom(ctx, "app1", "u1")
	must(t, err)
	if ur.RoomID != dirB.RoomID || ur.JoinedAtMs != 2000 || ur.AppCode != "app1" || ur.UserID != "u1" {
		t.Fatalf("user room %+v, want room-b joined at 2000", ur)
	}
	// The join counts as seen.
	if got, _ := d.StalePresence(ctx, dirB, 2000, 10); !reflect.DeepEqual(got, []persistence.Presence{{UserID: "u1", LastSeenMs: 2000}}) {
		t.Fatalf("presence after join: %+v, want u1 at 2000", got)
	}
	if _, err := d.UserRoom(ctx, "app1", "nobody"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("unknown user: %v, want ErrNotFound", err)
	}
}

// Every room but the last one set is handed back exactly once: that is
// what lets each joining room tell exactly one previous room to let go.
func testConcurrentSetUserRoom(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	const n = 20
	prevs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := persistence.RoomKey{AppCode: "app1", RoomID: fmt.Sprintf("r%02d", i)}
			var prev persistence.UserRoom
			prev, errs[i] = d.SetUserRoom(ctx, key, "u1", int64(1000+i))
			prevs[i] = prev.RoomID
		}()
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	ur, err := d.UserRoom(ctx, "app1", "u1")
	must(t, err)
	seen := map[string]int{}
	for _, p := range prevs {
		seen[p]++
	}
	if seen[""] != 1 {
		t.Fatalf("%d joins saw no previous room, want exactly 1: %v", seen[""], prevs)
	}
	if seen[ur.RoomID] != 0 {
		t.Fatalf("final room %s was handed back as previous: %v", ur.RoomID, prevs)
	}
	for i := range n {
		room := fmt.Sprintf("r%02d", i)
		if room != ur.RoomID && seen[room] != 1 {
			t.Fatalf("room %s handed back %d times, want 1: %v", room, seen[room], prevs)
		}
	}
}

func testClearUserRoomCompareAndDelete(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	_, err := d.SetUserRoom(ctx, dirA, "u1", 1000)
	must(t, err)
	_, err = d.SetUserRoom(ctx, dirB, "u1", 2000)
	must(t, err)
	// The late leave of room a must not clear the entry naming room b.
	must(t, d.ClearUserRoom(ctx, dirA, "u1"))
	ur, err := d.UserRoom(ctx, "app1", "u1")
	if err != nil || ur.RoomID != dirB.RoomID {
		t.Fatalf("after clearing a: %+v %v, want still room-b", ur, err)
	}
	if got, _ := d.StalePresence(ctx, dirA, 1<<40, 10); len(got) != 0 {
		t.Fatalf("presence in a after clearing: %+v", got)
	}
	must(t, d.ClearUserRoom(ctx, dirB, "u1"))
	if _, err := d.UserRoom(ctx, "app1", "u1"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("after clearing b: %v, want ErrNotFound", err)
	}
	if got, _ := d.StalePresence(ctx, dirB, 1<<40, 10); len(got) != 0 {
		t.Fatalf("presence in b after clearing: %+v", got)
	}
	// Clearing again is a no-op.
	must(t, d.ClearUserRoom(ctx, dirB, "u1"))
}

func testUserRoomPresence(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	_, err := d.SetUserRoom(ctx, dirA, "u1", 1000)
	must(t, err)
	must(t, d.Heartbeat(ctx, dirA, "u1", 1500))
	ur, err := d.UserRoom(ctx, "app1", "u1")
	must(t, err)
	want := persistence.UserRoom{AppCode: "app1", UserID: "u1", RoomID: dirA.RoomID, JoinedAtMs: 1000, LastSeenMs: 1500, Online: true}
	if ur != want {
		t.Fatalf("user room %+v, want %+v", ur, want)
	}
}

func entry(room string, heat, members int64) persistence.RoomEntry {
	return persistence.RoomEntry{AppCode: "app1", RoomID: room, Name: "Room " + room, OwnerUserID: "owner-" + room,
		MemberCount: members, Heat: heat, UpdatedAtMs: 5000 + heat}
}

func testUpdateRoomRanks(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	for _, tc := range []struct {
		e    persistence.RoomEntry
		want persistence.RankChange
	}{
		{entry("a", 10, 1), persistence.RankChange{Prev: 0, Rank: 1}},
		{entry("b", 30, 2), persistence.RankChange{Prev: 0, Rank: 1}},
		{entry("c", 20, 3), persistence.RankChange{Prev: 0, Rank: 2}},
		{entry("a", 10, 4), persistence.RankChange{Prev: 3, Rank: 3}},  // members only: rank kept
		{entry("a", 40, 4), persistence.RankChange{Prev: 3, Rank: 1}},  // heat up past both
		{entry("b", 40, 2), persistence.RankChange{Prev: 2, Rank: 2}},  // tie with a: a sorts first
		{entry("aa", 40, 1), persistence.RankChange{Prev: 0, Rank: 2}}, // a < aa < b
	} {
		got, err := d.UpdateRoom(ctx, tc.e)
		must(t, err)
		if got != tc.want {
			t.Fatalf("update %s heat %d: %+v, want %+v", tc.e.RoomID, tc.e.Heat, got, tc.want)
		}
	}
	page, err := d.ListRooms(ctx, "app1", 0, 10)
	must(t, err)
	if page.Total != 4 {
		t.Fatalf("total %d, want 4", page.Total)
	}
	want := []persistence.RoomEntry{entry("a", 40, 4), entry("aa", 40, 1), entry("b", 40, 2), entry("c", 20, 3)}
	for i := range want {
		want[i].Rank = int64(i + 1)
	}
	if !reflect.DeepEqual(page.Rooms, want) {
		t.Fatalf("listing\n got %+v\nwant %+v", page.Rooms, want)
	}
}

func testListRoomsPaging(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	for i := range 7 {
		_, err := d.UpdateRoom(ctx, entry(fmt.Sprintf("r%d", i), int64(100-i), 1))
		must(t, err)
	}
	var got []string
	for off := 0; ; off += 3 {
		page, err := d.ListRooms(ctx, "app1", off, 3)
		must(t, err)
		if page.Total != 7 {
			t.Fatalf("total %d, want 7", page.Total)
		}
		for j, r := range page.Rooms {
			if r.Rank != int64(off+j+1) {
				t.Fatalf("room %s at offset %d has rank %d", r.RoomID, off+j, r.Rank)
			}
			got = append(got, r.RoomID)
		}
		if len(page.Rooms) < 3 {
			break
		}
	}
	if want := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6"}; !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	if page, _ := d.ListRooms(ctx, "app1", 50, 3); len(page.Rooms) != 0 {
		t.Fatalf("past the end: %+v", page.Rooms)
	}
	if page, _ := d.ListRooms(ctx, "other-app", 0, 3); len(page.Rooms) != 0 || page.Total != 0 {
		t.Fatalf("other app: %+v", page)
	}
}

func testRemoveRoom(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	for _, e := range []persistence.RoomEntry{entry("a", 30, 1), entry("b", 20, 1), entry("c", 10, 1)} {
		_, err := d.UpdateRoom(ctx, e)
		must(t, err)
	}
	must(t, d.RemoveRoom(ctx, persistence.RoomKey{AppCode: "app1", RoomID: "a"}))
	must(t, d.RemoveRoom(ctx, persistence.RoomKey{AppCode: "app1", RoomID: "never-listed"}))
	page, err := d.ListRooms(ctx, "app1", 0, 10)
	must(t, err)
	if page.Total != 2 || len(page.Rooms) != 2 || page.Rooms[0].RoomID != "b" || page.Rooms[0].Rank != 1 {
		t.Fatalf("after removing a: %+v", page)
	}
	// Listing it again starts unranked.
	rc, err := d.UpdateRoom(ctx, entry("a", 30, 1))
	must(t, err)
	if rc != (persistence.RankChange{Prev: 0, Rank: 1}) {
		t.Fatalf("relisted: %+v", rc)
	}
}

func testClaimUserRoom(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	claim := func(key persistence.RoomKey, user string, joined int64) persistence.Claim {
		t.Helper()
		c, err := d.ClaimUserRoom(ctx, key, user, joined)
		must(t, err)
		return c
	}
	if c := claim(dirA, "u1", 1000); !c.Won || c.Other != "" || c.UserID != "u1" {
		t.Fatalf("absent: %+v, want won", c)
	}
	if c := claim(dirA, "u1", 500); !c.Won || c.Other != "" {
		t.Fatalf("same room: %+v, want won", c)
	}
	if ur, _ := d.UserRoom(ctx, "app1", "u1"); ur.JoinedAtMs != 1000 {
		t.Fatalf("a claim by the same room changed joined_at: %+v", ur)
	}
	if c := claim(dirB, "u1", 2000); !c.Won || c.Other != dirA.RoomID {
		t.Fatalf("newer join in b: %+v, want won from room-a", c)
	}
	if c := claim(dirA, "u1", 1000); c.Won || c.Other != dirB.RoomID {
		t.Fatalf("older join in a: %+v, want lost to room-b", c)
	}
	if c := claim(dirA, "u1", 2000); c.Won || c.Other != dirB.RoomID {
		t.Fatalf("equal join time: %+v, want the entry kept", c)
	}
	if ur, _ := d.UserRoom(ctx, "app1", "u1"); ur.RoomID != dirB.RoomID || ur.JoinedAtMs != 2000 {
		t.Fatalf("entry %+v, want room-b at 2000", ur)
	}
}

func testConcurrentClaims(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	const n = 20
	claims := make([]persistence.Claim, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := persistence.RoomKey{AppCode: "app1", RoomID: fmt.Sprintf("r%02d", i)}
			claims[i], errs[i] = d.ClaimUserRoom(ctx, key, "u1", int64(1000+i))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	ur, err := d.UserRoom(ctx, "app1", "u1")
	must(t, err)
	if ur.RoomID != "r19" || ur.JoinedAtMs != 1019 {
		t.Fatalf("entry %+v, want the newest join r19", ur)
	}
	if !claims[n-1].Won {
		t.Fatalf("the newest join lost: %+v", claims[n-1])
	}
}

func testSyncRoom(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	// Before: x left room a while the directory was away (presence and
	// entry linger); m1 has presence; m3 joined a after an older join in
	// b; m4 joined b after a.
	_, err := d.SetUserRoom(ctx, dirA, "x", 100)
	must(t, err)
	must(t, d.Heartbeat(ctx, dirA, "m1", 150))
	_, err = d.SetUserRoom(ctx, dirB, "m3", 200)
	must(t, err)
	_, err = d.SetUserRoom(ctx, dirB, "m4", 900)
	must(t, err)

	e := entry(dirA.RoomID, 70, 4)
	rc, claims, err := d.SyncRoom(ctx, persistence.RoomSync{Entry: e,
		Members: map[string]int64{"m1": 100, "m2": 110, "m3": 300, "m4": 400}, NowMs: 1000})
	must(t, err)
	if rc.Rank != 1 {
		t.Fatalf("rank after sync %+v, want 1", rc)
	}
	want := []persistence.Claim{{UserID: "m3", Won: true, Other: dirB.RoomID}, {UserID: "m4", Won: false, Other: dirB.RoomID}}
	if !reflect.DeepEqual(claims, want) {
		t.Fatalf("claims %+v, want %+v", claims, want)
	}
	got, err := d.StalePresence(ctx, dirA, 1<<40, 10)
	must(t, err)
	wantP := []persistence.Presence{{UserID: "m1", LastSeenMs: 150}, {UserID: "m2", LastSeenMs: 1000}, {UserID: "m3", LastSeenMs: 1000}, {UserID: "m4", LastSeenMs: 1000}}
	if !reflect.DeepEqual(got, wantP) {
		t.Fatalf("presence after sync %+v, want %+v (x gone, m1 kept, others seeded at now)", got, wantP)
	}
	if _, err := d.UserRoom(ctx, "app1", "x"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("x's entry after sync: %v, want ErrNotFound", err)
	}
	for user, room := range map[string]string{"m1": "room-a", "m2": "room-a", "m3": "room-a", "m4": "room-b"} {
		ur, err := d.UserRoom(ctx, "app1", user)
		if err != nil || ur.RoomID != room {
			t.Fatalf("%s: %+v %v, want %s", user, ur, err, room)
		}
	}
	page, err := d.ListRooms(ctx, "app1", 0, 10)
	must(t, err)
	e.Rank = 1
	if len(page.Rooms) != 1 || !reflect.DeepEqual(page.Rooms[0], e) {
		t.Fatalf("listing after sync: %+v, want %+v", page.Rooms, e)
	}
}

func testDirectoryAppsIsolated(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	other := persistence.RoomKey{AppCode: "app2", RoomID: dirA.RoomID}
	_, err := d.SetUserRoom(ctx, dirA, "u1", 100)
	must(t, err)
	prev, err := d.SetUserRoom(ctx, other, "u1", 200)
	must(t, err)
	if prev != (persistence.UserRoom{}) {
		t.Fatalf("a join in another app saw %+v: apps must not share entries", prev)
	}
	must(t, d.Heartbeat(ctx, other, "u2", 300))
	if got, _ := d.StalePresence(ctx, dirA, 1<<40, 10); !reflect.DeepEqual(users(got), []string{"u1"}) {
		t.Fatalf("presence of app1 room: %v", users(got))
	}
	_, err = d.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app2", RoomID: "z", Heat: 5})
	must(t, err)
	if page, _ := d.ListRooms(ctx, "app1", 0, 10); page.Total != 0 {
		t.Fatalf("app1 lists app2's room: %+v", page)
	}
}

func testDirectoryCancelled(t *testing.T, d persistence.Directory) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Heartbeat(ctx, dirA, "u1", 100); err == nil {
		t.Fatal("heartbeat with a cancelled context succeeded")
	}
	if _, err := d.SetUserRoom(ctx, dirA, "u1", 100); err == nil {
		t.Fatal("set user room with a cancelled context succeeded")
	}
	if _, err := d.UserRoom(context.Background(), "app1", "u1"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a cancelled join was written: %v", err)
	}
}

// A room's metadata is listed as written, replaced by the next write, and
// a room without any lists as public with no category.
func testDirectoryRoomMetadata(t *testing.T, d persistence.Directory) {
	ctx := context.Background()
	a := entry("m1", 30, 1)
	a.Meta = &persistence.RoomMeta{Category: "music", Tags: []string{"chill", "jazz"}, CoverURL: "https://cdn/1.png", Visibility: "unlisted"}
	b := entry("m2", 20, 1)
	for _, e := range []persistence.RoomEntry{a, b} {
		_, err := d.UpdateRoom(ctx, e)
		must(t, err)
	}
	page, err := d.ListRooms(ctx, "app1", 0, 10)
	must(t, err)
	a.Rank, b.Rank = 1, 2
	if len(page.Rooms) != 2 || !reflect.DeepEqual(page.Rooms[0], a) || !reflect.DeepEqual(page.Rooms[1], b) {
		t.Fatalf("listing %+v, want %+v and %+v", page.Rooms, a, b)
	}
	a.Meta = &persistence.RoomMeta{Category: "talk"}
	a.Rank = 0
	_, err = d.UpdateRoom(ctx, a)
	must(t, err)
	page, err = d.ListRooms(ctx, "app1", 0, 1)
	must(t, err)
	a.Rank = 1
	if len(page.Rooms) != 1 || !reflect.DeepEqual(page.Rooms[0], a) {
		t.Fatalf("after a metadata change %+v, want %+v", page.Rooms, a)
	}
}
