package main

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// The room-management commands over gRPC against a whole dev process:
// each rule seen from a client, bad input refused without a trace, and
// the command log replaying to exactly the room the clients see.
func TestEndToEndRoomManagementOverGRPC(t *testing.T) {
	app, rc := startDev(t, nil)
	ctx := ctxT(t)
	const a, r = "demo", "mgmt"
	n := 0
	id := func() string { n++; return "m" + string(rune('a'+n/26)) + string(rune('a'+n%26)) }
	ok := func(what string) func(*v1.CommandReply, error) *v1.RoomView {
		return func(reply *v1.CommandReply, err error) *v1.RoomView {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return reply.GetRoom()
		}
	}
	ok("create")(rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", Name: "Alice's", MicSeats: 4}))
	for _, u := range []string{"bob", "carol", "dave"} {
		ok("join " + u)(rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: u}))
	}
	ok("carol on seat 1")(rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "carol", Seat: 1}))

	// Admins: the owner appoints bob; bob may not appoint anyone.
	_, err := rc.SetAdmin(ctx, &v1.SetAdminRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "bob", TargetUserId: "dave"})
	wantCode(t, err, codes.PermissionDenied, "a member appoints an admin")
	setID := id()
	v := ok("set admin")(rc.SetAdmin(ctx, &v1.SetAdminRequest{CommandId: setID, AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "bob"}))
	if len(v.AdminUserIds) != 1 || v.AdminUserIds[0] != "bob" {
		t.Fatalf("admins after SetAdmin: %v", v.AdminUserIds)
	}
	again, err := rc.SetAdmin(ctx, &v1.SetAdminRequest{CommandId: setID, AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "bob"})
	if err != nil || !again.Duplicate {
		t.Fatalf("retried SetAdmin: %v %v", again, err)
	}

	// Mute: the seated user stays; the mute outlives them on the seat.
	v = ok("bob mutes seat 1")(rc.MuteSeat(ctx, &v1.MuteSeatRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "bob", Seat: 1}))
	if s := v.Seats[1]; !s.Muted || s.UserId != "carol" {
		t.Fatalf("seat 1 after mute: %v", s)
	}
	ok("carol releases")(rc.ReleaseMic(ctx, &v1.ReleaseMicRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "carol"}))
	v = ok("dave takes the muted seat")(rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "dave", Seat: 1}))
	if s := v.Seats[1]; !s.Muted || s.UserId != "dave" {
		t.Fatalf("seat 1 with a new holder: %v", s)
	}
	_, err = rc.MuteSeat(ctx, &v1.MuteSeatRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "carol", Seat: 0})
	wantCode(t, err, codes.PermissionDenied, "a member mutes")

	// Lock: an occupied seat is freed, its holder stays in the room, and
	// nobody takes it until it is unlocked.
	v = ok("lock seat 1")(rc.LockSeat(ctx, &v1.LockSeatRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", Seat: 1}))
	inRoom, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: a, RoomId: r})
	if err != nil {
		t.Fatal(err)
	}
	if s := v.Seats[1]; !s.Locked || s.UserId != "" || !contains(inRoom.Room.Members, "dave") || v.MemberCount != 4 {
		t.Fatalf("after locking dave's seat: seat %v members %v (count %d)", s, inRoom.Room.Members, v.MemberCount)
	}
	_, err = rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "dave", Seat: 1})
	wantCode(t, err, codes.FailedPrecondition, "take a locked seat")
	ok("unlock seat 1")(rc.UnlockSeat(ctx, &v1.UnlockSeatRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "bob", Seat: 1}))
	ok("take it again")(rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "dave", Seat: 1}))
	ok("unmute")(rc.UnmuteSeat(ctx, &v1.UnmuteSeatRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", Seat: 1}))

	// UpdateRoom by an admin; not by a member.
	v = ok("update")(rc.UpdateRoom(ctx, &v1.UpdateRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "bob",
		Name: "Bob's now", Announcement: proto.String("rules:\nbe nice")}))
	if v.Name != "Bob's now" || v.Announcement != "rules:\nbe nice" {
		t.Fatalf("after UpdateRoom: %q %q", v.Name, v.Announcement)
	}
	_, err = rc.UpdateRoom(ctx, &v1.UpdateRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "carol", Name: "mine"})
	wantCode(t, err, codes.PermissionDenied, "a member renames")

	// RemoveAdmin: owner only; afterwards bob has no rights left.
	_, err = rc.RemoveAdmin(ctx, &v1.RemoveAdminRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "bob", TargetUserId: "bob"})
	wantCode(t, err, codes.PermissionDenied, "an admin removes themself")
	ok("remove admin")(rc.RemoveAdmin(ctx, &v1.RemoveAdminRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "bob"}))
	_, err = rc.LockSeat(ctx, &v1.LockSeatRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "bob", Seat: 0})
	wantCode(t, err, codes.PermissionDenied, "a former admin locks")

	before, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: a, RoomId: r})
	if err != nil {
		t.Fatal(err)
	}
	rowsBefore, _ := app.store.ListOutbox(ctx, outboxAll())

	// Bad input: InvalidArgument, nothing written.
	bad := []struct {
		name string
		call func() error
	}{
		{"name with NUL", func() error {
			_, err := rc.UpdateRoom(ctx, &v1.UpdateRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", Name: "a\x00b"})
			return err
		}},
		{"blank name", func() error {
			_, err := rc.UpdateRoom(ctx, &v1.UpdateRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", Name: " \u3000 "})
			return err
		}},
		{"announcement with ESC", func() error {
			_, err := rc.UpdateRoom(ctx, &v1.UpdateRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", Announcement: proto.String("\x1b[2J")})
			return err
		}},
		{"update with nothing", func() error {
			_, err := rc.UpdateRoom(ctx, &v1.UpdateRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice"})
			return err
		}},
		{"create with a blank name", func() error {
			_, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: id(), AppCode: a, RoomId: "other", UserId: "alice", Name: "   "})
			return err
		}},
		{"kick reason with a newline", func() error {
			_, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "carol", Reason: "x\ny"})
			return err
		}},
		{"client claims heartbeat_timeout", func() error {
			_, err := rc.LeaveRoom(ctx, &v1.LeaveRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "carol", Reason: room.ReasonHeartbeatTimeout})
			return err
		}},
		{"client claims switched_room", func() error {
			_, err := rc.LeaveRoom(ctx, &v1.LeaveRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "carol", Reason: room.ReasonSwitchedRoom})
			return err
		}},
		{"seat out of range", func() error {
			_, err := rc.MuteSeat(ctx, &v1.MuteSeatRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", Seat: 4})
			return err
		}},
		{"negative seat", func() error {
			_, err := rc.LockSeat(ctx, &v1.LockSeatRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", Seat: -1})
			return err
		}},
		{"bad admin target", func() error {
			_, err := rc.SetAdmin(ctx, &v1.SetAdminRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "a b"})
			return err
		}},
	}
	for _, b := range bad {
		wantCode(t, b.call(), codes.InvalidArgument, b.name)
	}
	after, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: a, RoomId: r})
	if err != nil || !proto.Equal(after, before) {
		t.Fatalf("bad input changed the room:\nbefore %v\nafter  %v (%v)", before, after, err)
	}
	if rows, _ := app.store.ListOutbox(ctx, outboxAll()); len(rows) != len(rowsBefore) {
		t.Fatalf("bad input wrote %d outbox rows", len(rows)-len(rowsBefore))
	}
	// A plain leave still works, so the refusal above is about the reason.
	ok("carol leaves")(rc.LeaveRoom(ctx, &v1.LeaveRoomRequest{CommandId: id(), AppCode: a, RoomId: r, UserId: "carol", Reason: "bye"}))

	// Replay equals live: the command log, decoded and applied from
	// empty, is the room GetRoom shows.
	live, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: a, RoomId: r})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := app.store.LoadCommands(ctx, persistence.RoomKey{AppCode: a, RoomID: r}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := room.NewState(a, r)
	seen := map[string]bool{}
	for _, rec := range recs {
		evs := make([]room.Event, 0, len(rec.Events))
		for _, env := range rec.Events {
			e, err := room.DecodeEvent(env.EventType, env.Payload)
			if err != nil {
				t.Fatalf("seq %d: %v", rec.Seq, err)
			}
			seen[env.EventType] = true
			evs = append(evs, e)
		}
		s = room.ApplyCommand(s, rec.Seq, evs)
	}
	if replayed := room.View(s); !proto.Equal(replayed, live.Room) {
		t.Fatalf("replay differs from live:\nreplay %v\nlive   %v", replayed, live.Room)
	}
	for _, typ := range []string{room.TypeRoomAdminSet, room.TypeRoomAdminRemoved, room.TypeRoomSeatMuted, room.TypeRoomSeatUnmuted,
		room.TypeRoomSeatLocked, room.TypeRoomSeatUnlocked, room.TypeRoomUpdated} {
		if !seen[typ] {
			t.Errorf("no %s in the command log", typ)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
