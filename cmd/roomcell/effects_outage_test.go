package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
)

// outage is how long IM, then TRTC, fail in TestEffectsSurviveOutages:
// 30 s, shortened under -short.
func outage() time.Duration {
	if testing.Short() {
		return 3 * time.Second
	}
	return 30 * time.Second
}

// TestEffectsSurviveOutages: kicks (and the joins between them) made
// while IM fails for 30 s, then while TRTC fails for 30 s, all succeed
// as commands; once each is back every kick's effects are done, none
// lost: each kicked user is banned from the AVChatRoom and removed from
// the audio room, in kick order, and the room's messages reached the
// group once each, in room_seq order, none after a kick before it. The
// close after it all tears both down.
func TestEffectsSurviveOutages(t *testing.T) {
	// No presence worker: its heartbeat-timeout leaves would add events
	// this test does not count.
	app, rc := startDev(t, func(c *configs.Config) { off := false; c.Presence.Enabled = &off })
	ctx, cancel := context.WithTimeout(context.Background(), 4*outage()+60*time.Second)
	defer cancel()
	const a, r = "demo", "fx-outage"
	gid := roomim.GroupID(a, r)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c", AppCode: a, RoomId: r, UserId: "host", Name: "outage"}); err != nil {
		t.Fatal(err)
	}
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	for _, u := range users {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j-" + u, AppCode: a, RoomId: r, UserId: u}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "joins delivered", func() bool { return len(app.fakeIM.GroupMessages(gid)) > 0 })
	present(t, app, gid, append([]string{"host", "watcher"}, users...)...)

	kickID := map[string]string{}
	var lastID string
	kick := func(u string) {
		t.Helper()
		k, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "k-" + u, AppCode: a, RoomId: r, UserId: "host", TargetUserId: u, BanSeconds: 3600})
		if err != nil {
			t.Fatalf("kick %s during an outage: %v", u, err)
		}
		kickID[u] = k.EventIds[len(k.EventIds)-1]
		// Something after each kick, so order can be checked.
		j, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "after-" + u, AppCode: a, RoomId: r, UserId: "late-" + u})
		if err != nil {
			t.Fatal(err)
		}
		lastID = j.EventIds[len(j.EventIds)-1]
	}
	spread := func(d time.Duration, us []string) {
		for _, u := range us {
			kick(u)
			time.Sleep(d / time.Duration(len(us)+1))
		}
	}

	// IM down for the outage: nothing is banned or removed meanwhile (the
	// kick message comes first, and it cannot be sent).
	app.fakeIM.SetHTTPStatus(http.StatusBadGateway)
	began := time.Now()
	spread(outage(), users[:3])
	time.Sleep(time.Until(began.Add(outage())))
	for _, u := range users[:3] {
		if _, banned := app.fakeIM.BannedUntil(gid, u); banned || !app.fakeTRTC.InRoom(gid, u) {
			t.Fatalf("%s enforced while IM was down", u)
		}
	}
	app.fakeIM.SetHTTPStatus(0)
	eventually(t, 20*time.Second, "the first kicks enforced after IM is back", func() bool {
		for _, u := range users[:3] {
			if _, banned := app.fakeIM.BannedUntil(gid, u); !banned || app.fakeTRTC.InRoom(gid, u) {
				return false
			}
		}
		return true
	})

	// TRTC down for the outage: IM goes on up to each kick's audio step.
	app.fakeTRTC.SetFailing("InternalError")
	began = time.Now()
	spread(outage(), users[3:])
	time.Sleep(time.Until(began.Add(outage())))
	for _, u := range users[3:] {
		if !app.fakeTRTC.InRoom(gid, u) {
			t.Fatalf("%s removed from TRTC while it was failing", u)
		}
	}
	app.fakeTRTC.SetFailing("")
	eventually(t, 20*time.Second, "the later kicks enforced after TRTC is back", func() bool {
		for _, u := range users[3:] {
			if _, banned := app.fakeIM.BannedUntil(gid, u); !banned || app.fakeTRTC.InRoom(gid, u) {
				return false
			}
		}
		return true
	})
	if got := app.fakeTRTC.Removed(gid); !slices.Equal(got, users) {
		t.Fatalf("audio removals %v, want each kicked user once, in kick order %v", got, users)
	}

	eventually(t, 10*time.Second, "the last event delivered", func() bool { return app.fakeIM.EventIDCounts()[lastID] > 0 })
	// Every IM event of the room reached the group exactly once (first
	// deliveries; a retried message may repeat, clients drop it by
	// event_id), in room_seq order.
	var seqs []int
	seen := map[string]bool{}
	for _, m := range app.fakeIM.GroupMessages(gid) {
		for _, id := range m.EventIDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			var seq, idx int
			if _, err := fmt.Sscanf(strings.TrimPrefix(id, a+":"+r+":"), "%d:%d", &seq, &idx); err != nil {
				t.Fatalf("event id %q: %v", id, err)
			}
			seqs = append(seqs, seq)
		}
	}
	if !slices.IsSorted(seqs) {
		t.Fatalf("first deliveries out of room_seq order: %v", seqs)
	}
	// create(2 events: only the join goes) + 6 joins + 6 × (kick + join).
	if want := 1 + len(users) + 2*len(users); len(seen) != want {
		t.Fatalf("%d distinct events delivered, want %d", len(seen), want)
	}
	// A kicked user got nothing after their kick.
	for _, u := range users {
		got := app.fakeIM.Received(gid, u)
		if len(got) == 0 || !slices.Contains(got[len(got)-1].EventIDs, kickID[u]) {
			t.Fatalf("%s's last message is not their kick %s: %+v", u, kickID[u], got)
		}
	}
	if _, err := rc.CloseRoom(ctx, &v1.CloseRoomRequest{CommandId: "x", AppCode: a, RoomId: r, UserId: "host"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "close tears down", func() bool {
		_, ok := app.fakeIM.Group(gid)
		return !ok && app.fakeTRTC.Dismissed(gid) == 1
	})
}
