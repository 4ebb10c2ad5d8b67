package main

import (
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/delivery/roomim"
)

// TestChatMuteAndReopenEnforcedAtTencent: through a whole dev process, a
// MuteMember mutes the member in the IM group (who stays in it) until the
// room's mute ends, an UnmuteMember lifts it, and a room closed and
// reopened has its IM group again, which the owner can enter.
func TestChatMuteAndReopenEnforcedAtTencent(t *testing.T) {
	app, rc := startDev(t, nil)
	ctx := ctxT(t)
	const a, r = "demo", "fx-mute"
	gid := roomim.GroupID(a, r)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "alice", Name: "fx"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j1", AppCode: a, RoomId: r, UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	present(t, app, gid, "alice", "bob")
	start := time.Now()
	reply, err := rc.MuteMember(ctx, &v1.MuteMemberRequest{CommandId: "m1", AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "bob", MuteSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	until := reply.GetRoom().GetMutedMembers()[0].GetMutedUntilMs()
	eventually(t, 5*time.Second, "bob muted in IM", func() bool {
		end, muted := app.fakeIM.MutedUntil(gid, "bob")
		// Counted from when the effect ran, rounded up to a second.
		return muted && end.UnixMilli() >= until && end.UnixMilli() <= until+time.Since(start).Milliseconds()+1000
	})
	if !app.fakeIM.InGroup(gid, "bob") {
		t.Fatal("a muted member must stay in the group")
	}
	if _, err := rc.UnmuteMember(ctx, &v1.UnmuteMemberRequest{CommandId: "u1", AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "bob's IM mute lifted", func() bool {
		_, muted := app.fakeIM.MutedUntil(gid, "bob")
		return !muted
	})

	closed, err := rc.CloseRoom(ctx, &v1.CloseRoomRequest{CommandId: "x1", AppCode: a, RoomId: r, UserId: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "group destroyed", func() bool { _, ok := app.fakeIM.Group(gid); return !ok })
	reopened, err := rc.ReopenRoom(ctx, &v1.ReopenRoomRequest{CommandId: "o1", AppCode: a, RoomId: r, UserId: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if reopened.GetRoom().GetStatus() != "open" || reopened.GetRoomSeq() != closed.GetRoomSeq()+1 {
		t.Fatalf("reopen: status %s at seq %d, want open at %d (the log goes on)", reopened.GetRoom().GetStatus(), reopened.GetRoomSeq(), closed.GetRoomSeq()+1)
	}
	eventually(t, 5*time.Second, "group made again", func() bool { _, ok := app.fakeIM.Group(gid); return ok })
	if err := app.fakeIM.EnterGroup(gid, "alice"); err != nil {
		t.Fatalf("owner entering the reopened room's group: %v", err)
	}
}
