package departures

import (
	"fmt"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/roomgrain/graintest"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// fixture hosts room grains as the cluster's placement would, with the
// departures observer wired.
type fixture struct{ *graintest.Host }

func newFixture(t testing.TB) *fixture { return &fixture{graintest.New(t)} }

func (f *fixture) activate(identity string, observers ...roomgrain.NewObserver) *actor.PID {
	return f.Activate(roomgrain.GrainProps(f.Deps(observers...)), identity)
}

func (f *fixture) do(pid *actor.PID, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	return f.Do(pid, rc)
}
func (f *fixture) mustDo(pid *actor.PID, rc *v1.RoomCommand) *v1.CommandReply {
	return f.MustDo(pid, rc)
}

func rcCreate(cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: user, Name: "Room One"}}}
}

func rcJoin(cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: user}}}
}

func rcLeave(cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: user}}}
}

func rcKick(cmdID, owner, target string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_KickUser{KickUser: &v1.KickUserRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: owner, TargetUserId: target}}}
}

func rcGift(cmdID, from, to string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_SendGift{SendGift: &v1.SendGiftRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: from, ToUserId: to, GiftId: "rose", GiftCount: 2}}}
}

// A command refused because its user is no longer a member says when and
// why the user went: a heartbeat timeout, a kick (by whom, why, the ban),
// a switch to another room or their own leave. The refusal keeps
// ErrNotMember's code and class; a rejoin forgets the removal, and a user
// who never was a member gets the plain refusal.
func TestNotMemberRefusalSaysWhenAndWhy(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1", Observe())
	f.mustDo(pid, rcCreate("c1", "owner"))
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		f.mustDo(pid, rcJoin("join-"+u, u))
	}
	leave := func(id, user, reason string) *v1.RoomCommand {
		rc := rcLeave(id, user)
		rc.GetLeaveRoom().Reason = reason
		return rc
	}
	f.mustDo(pid, leave(room.HeartbeatTimeoutIDPrefix+"u1", "u1", room.ReasonHeartbeatTimeout))
	kick := rcKick("kick-u2", "owner", "u2")
	kick.GetKickUser().Reason, kick.GetKickUser().BanSeconds = "spam", 600
	f.mustDo(pid, kick)
	f.mustDo(pid, rcLeave("bye-u3", "u3"))
	f.mustDo(pid, leave(room.DirectoryIDPrefix+"u4", "u4", room.ReasonSwitchedRoom))

	refused := func(user string) string {
		t.Helper()
		_, err := f.do(pid, rcGift("gift-"+user, user, "owner"))
		if err == nil || errclass.CodeOf(err) != errclass.CodeNotMember || !strings.Contains(err.Error(), "user is not a member of the room") {
			t.Fatalf("gift from %s: %v (code %v); want the not-member refusal", user, err, errclass.CodeOf(err))
		}
		return err.Error()
	}
	for user, want := range map[string][]string{
		"u1": {"u1 was removed at ", " ago): heartbeat_timeout", "JoinRoom to come back"},
		"u2": {"u2 was removed at ", "kicked by owner (spam), banned until "},
		"u3": {"u3 was removed at ", "left (the user's LeaveRoom)", "JoinRoom to come back"},
		"u4": {"u4 was removed at ", "switched_room"},
	} {
		msg := refused(user)
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s's refusal %q lacks %q", user, msg, w)
			}
		}
	}
	// The facts travel as the error's metadata (ErrorInfo on the API),
	// for a client to read without parsing the text.
	meta := func(user string) map[string]string {
		t.Helper()
		_, err := f.do(pid, rcGift("gift-meta-"+user, user, "owner"))
		return errclass.MetaOf(err)
	}
	if m := meta("u2"); m["removed_reason"] != room.ReasonKicked || m["removed_by"] != "owner" || m["removed_note"] != "spam" || m["ban_until"] == "" || m["removed_at"] == "" {
		t.Errorf("kicked user's refusal metadata %v", m)
	}
	if m := meta("u1"); m["removed_reason"] != room.ReasonHeartbeatTimeout || m["ban_until"] != "" || m["removed_by"] != "" {
		t.Errorf("timed-out user's refusal metadata %v", m)
	}
	if m := meta("stranger"); m != nil {
		t.Errorf("a user who never joined has removal metadata %v", m)
	}
	if msg := refused("u2"); strings.Contains(msg, "JoinRoom to come back") {
		t.Errorf("a banned user is told to join again: %q", msg)
	}
	// A heartbeat (not a mutation) is explained the same way.
	_, err := f.do(pid, &v1.RoomCommand{Command: &v1.RoomCommand_Heartbeat{Heartbeat: &v1.HeartbeatRequest{
		AppCode: "app", RoomId: "r1", UserId: "u1"}}})
	if err == nil || !strings.Contains(err.Error(), "heartbeat_timeout") {
		t.Fatalf("heartbeat after the timeout: %v", err)
	}
	if msg := refused("stranger"); strings.Contains(msg, "removed") {
		t.Fatalf("a user who never joined is told of a removal: %q", msg)
	}
	// Back in, the old removal is forgotten; a new leave is the one told.
	f.mustDo(pid, rcJoin("rejoin-u1", "u1"))
	f.mustDo(pid, rcGift("gift-back", "u1", "owner"))
	f.mustDo(pid, rcLeave("bye-u1", "u1"))
	if msg := refused("u1"); !strings.Contains(msg, "left (the user's LeaveRoom)") || strings.Contains(msg, "heartbeat") {
		t.Fatalf("after a rejoin and a leave: %q", msg)
	}
}

// The node remembers at most maxDepartures removals, the oldest going
// first; a forgotten one leaves the plain refusal.
func TestDeparturesBounded(t *testing.T) {
	d := newDepartures()
	for i := range maxDepartures + 10 {
		d.committed("app/r1", int64(i), []room.Event{room.RoomUserLeft{UserID: fmt.Sprintf("u%d", i), Reason: room.ReasonLeft}})
	}
	if n := len(d.m); n != maxDepartures {
		t.Fatalf("%d departures kept, want %d", n, maxDepartures)
	}
	if _, ok := d.get("app/r1", "u0"); ok {
		t.Fatal("the oldest departure was kept past the bound")
	}
	if dep, ok := d.get("app/r1", fmt.Sprintf("u%d", maxDepartures+9)); !ok || dep.atMs != int64(maxDepartures+9) {
		t.Fatalf("the newest departure: %+v %v", dep, ok)
	}
	if err := d.explain("app/r1", room.State{}, "u0", 0, room.ErrNotMember); err != room.ErrNotMember {
		t.Fatalf("a forgotten departure changed the refusal: %v", err)
	}
}
