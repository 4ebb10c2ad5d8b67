package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
)

// eventually polls cond every 50 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// present puts users in the room's IM group and audio room, as their
// clients would after joining.
func present(t *testing.T, app *App, gid string, users ...string) {
	t.Helper()
	for _, u := range users {
		if err := app.fakeIM.EnterGroup(gid, u); err != nil {
			t.Fatalf("%s enters the group: %v", u, err)
		}
		app.fakeTRTC.EnterRoom(gid, u)
	}
}

// TestKickAndCloseEnforcedAtTencent: through a whole dev process, a kick
// with a ban bans the user from the AVChatRoom (out of it, cannot enter
// again) and removes them from the audio room; a close dismisses the
// audio room and destroys the group. CreateRoom's reply says the group is
// there, and it is.
func TestKickAndCloseEnforcedAtTencent(t *testing.T) {
	app, rc := startDev(t, nil)
	ctx := ctxT(t)
	const a, r = "demo", "fx-1"
	gid := roomim.GroupID(a, r)
	created, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "alice", Name: "fx"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := app.fakeIM.Group(gid); !created.ImGroupReady || !ok {
		t.Fatalf("create: im_group_ready %v, group exists %v; want both", created.ImGroupReady, ok)
	}
	for i, u := range []string{"bob", "carol"} {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: fmt.Sprintf("j%d", i), AppCode: a, RoomId: r, UserId: u}); err != nil {
			t.Fatal(err)
		}
	}
	present(t, app, gid, "alice", "bob", "carol")
	if _, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "k1", AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "bob", BanSeconds: 600, Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "bob banned in IM and out of TRTC", func() bool {
		_, banned := app.fakeIM.BannedUntil(gid, "bob")
		return banned && !app.fakeTRTC.InRoom(gid, "bob")
	})
	if err := app.fakeIM.EnterGroup(gid, "bob"); !errors.Is(err, imfake.ErrBanned) {
		t.Fatalf("bob re-entering the group: %v", err)
	}
	if !app.fakeIM.InGroup(gid, "carol") || !app.fakeTRTC.InRoom(gid, "carol") {
		t.Fatal("carol must stay")
	}
	if _, err := rc.CloseRoom(ctx, &v1.CloseRoomRequest{CommandId: "x1", AppCode: a, RoomId: r, UserId: "alice"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "group destroyed and audio room dismissed", func() bool {
		_, ok := app.fakeIM.Group(gid)
		return !ok && app.fakeTRTC.Dismissed(gid) == 1
	})
	// Everyone got the close, bob nothing after his kick.
	for _, u := range []string{"alice", "carol"} {
		if got := app.fakeIM.Received(gid, u); len(got) == 0 || !slices.Contains(got[len(got)-1].EventIDs, fmt.Sprintf("%s:%s:%d:0", a, r, 5)) {
			t.Fatalf("%s did not get the close last: %+v", u, got)
		}
	}
}

// TestCreateRoomWithIMDown: with IM unreachable CreateRoom still succeeds
// (bounded by create_group_timeout) and says the group is not ready; the
// RoomCreated row creates it once IM is back, and a repeat of the same
// CreateRoom then says ready.
func TestCreateRoomWithIMDown(t *testing.T) {
	app, rc := startDev(t, nil)
	const a, r = "demo", "fx-down"
	gid := roomim.GroupID(a, r)
	app.fakeIM.SetHTTPStatus(http.StatusBadGateway)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	created, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "alice", Name: "down"})
	if err != nil {
		t.Fatalf("CreateRoom with IM down: %v", err)
	}
	if took := time.Since(start); created.ImGroupReady || took > 3*time.Second {
		t.Fatalf("im_group_ready %v after %s; want false within create_group_timeout", created.ImGroupReady, took)
	}
	time.Sleep(1500 * time.Millisecond) // the relay tries (and fails) meanwhile
	if _, ok := app.fakeIM.Group(gid); ok {
		t.Fatal("group exists while IM is down")
	}
	app.fakeIM.SetHTTPStatus(0)
	eventually(t, 10*time.Second, "group created once IM is back", func() bool {
		_, ok := app.fakeIM.Group(gid)
		return ok
	})
	again, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "alice", Name: "down"})
	if err != nil || !again.Duplicate || !again.ImGroupReady {
		t.Fatalf("repeat: %+v %v; want a duplicate with the group ready", again, err)
	}
	// The owner's join (same command) reached the group after the create.
	eventually(t, 10*time.Second, "owner's join delivered", func() bool {
		return app.fakeIM.EventIDCounts()[fmt.Sprintf("%s:%s:1:1", a, r)] == 1
	})
}

// TestRefusedEffectParksAndIsRepaired: when TRTC refuses a kick's removal
// itself (a parameter error), the event is parked for an operator like
// any event IM refuses, its done steps (message, ban) stay done, and the
// room's later events go on; once the cause is fixed, the operator's
// retry (roomctl outbox retry) finishes it.
func TestRefusedEffectParksAndIsRepaired(t *testing.T) {
	app, rc := startDev(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const a, r = "demo", "fx-park"
	gid := roomim.GroupID(a, r)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "alice", Name: "park"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j1", AppCode: a, RoomId: r, UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	present(t, app, gid, "alice", "bob")
	app.fakeTRTC.SetFailing("InvalidParameter.UserIds")
	k, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "k1", AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "bob", BanSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	kickID := k.EventIds[len(k.EventIds)-1]
	admin := v1.NewOutboxAdminClient(dialApp(t, app))
	status := func() string {
		got, err := admin.GetOutbox(ctx, &v1.GetOutboxRequest{EventId: kickID})
		if err != nil {
			t.Fatal(err)
		}
		return got.Entry.Status
	}
	eventually(t, 15*time.Second, "kick parked", func() bool { return status() == "parked" })
	if _, banned := app.fakeIM.BannedUntil(gid, "bob"); !banned || !app.fakeTRTC.InRoom(gid, "bob") {
		t.Fatal("want the IM ban done and the audio removal not")
	}
	j, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j2", AppCode: a, RoomId: r, UserId: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "later events go on past the parked one", func() bool {
		return app.fakeIM.EventIDCounts()[j.EventIds[0]] > 0
	})
	app.fakeTRTC.SetFailing("")
	if _, err := admin.RetryOutbox(ctx, &v1.RetryOutboxRequest{EventId: kickID}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "repaired kick done", func() bool {
		return status() == "published" && !app.fakeTRTC.InRoom(gid, "bob")
	})
	// The ban and the removal are not repeated (the fake IM and TRTC hold
	// one of each), and the room saw the kick's group message once: the
	// repair skips the message this process sent (and a kick travels
	// alone, so another process's resend would be Tencent's duplicate).
	// The kicked user's private notice carries the same event id; it is
	// not the group's message.
	shown := 0
	for _, m := range app.fakeIM.GroupMessages(gid) {
		if slices.Contains(m.EventIDs, kickID) {
			shown++
		}
	}
	if shown != 1 {
		t.Fatalf("kick group message shown %d times, want once", shown)
	}
}
