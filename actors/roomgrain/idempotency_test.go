package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// idemCase is one command type: the commands that make it valid, and the
// command itself under the command_id "X".
type idemCase struct {
	setup []*v1.RoomCommand
	cmd   *v1.RoomCommand
}

func idemCases(roomID string) map[string]idemCase {
	cmd := func(m proto.Message) *v1.RoomCommand {
		rc := &v1.RoomCommand{}
		od := rc.ProtoReflect().Descriptor().Oneofs().ByName("command")
		for i := 0; i < od.Fields().Len(); i++ {
			if f := od.Fields().Get(i); f.Message().FullName() == m.ProtoReflect().Descriptor().FullName() {
				rc.ProtoReflect().Set(f, protoreflect.ValueOfMessage(m.ProtoReflect()))
			}
		}
		return rc
	}
	create := cmd(&v1.CreateRoomRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Name: "Room", MicSeats: 8, AdminUserIds: []string{"adm"}})
	setupCreate := proto.Clone(create).(*v1.RoomCommand)
	setupCreate.GetCreateRoom().CommandId = "s-create"
	join := func(id, user string) *v1.RoomCommand {
		return cmd(&v1.JoinRoomRequest{CommandId: id, AppCode: "app", RoomId: roomID, UserId: user})
	}
	base := []*v1.RoomCommand{setupCreate, join("s-bob", "bob"), join("s-carol", "carol")}
	with := func(extra ...*v1.RoomCommand) []*v1.RoomCommand {
		return append(append([]*v1.RoomCommand{}, base...), extra...)
	}
	applyMode := cmd(&v1.SetSeatModeRequest{CommandId: "s-mode", AppCode: "app", RoomId: roomID, UserId: "owner", SeatMode: "apply"})
	bobApplied := cmd(&v1.ApplySeatRequest{CommandId: "s-apply", AppCode: "app", RoomId: roomID, UserId: "bob", Seat: 1, TimeoutSeconds: 300})
	bobInvited := cmd(&v1.InviteToSeatRequest{CommandId: "s-inv", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob", Seat: 1, TimeoutSeconds: 300})
	bobSeated := cmd(&v1.TakeMicRequest{CommandId: "s-seat", AppCode: "app", RoomId: roomID, UserId: "bob", Seat: 1})
	return map[string]idemCase{
		"create_room": {cmd: create},
		"join_room":   {setup: with(), cmd: join("X", "dave")},
		"leave_room":  {setup: with(), cmd: cmd(&v1.LeaveRoomRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "bob", Reason: "left"})},
		"take_mic":    {setup: with(), cmd: cmd(&v1.TakeMicRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "bob", Seat: 1})},
		"release_mic": {
			setup: with(cmd(&v1.TakeMicRequest{CommandId: "s-mic", AppCode: "app", RoomId: roomID, UserId: "bob", Seat: 1})),
			cmd:   cmd(&v1.ReleaseMicRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "bob"}),
		},
		"send_gift":  {setup: with(), cmd: cmd(&v1.SendGiftRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", ToUserId: "bob", GiftId: "rose", GiftCount: 2})},
		"kick_user":  {setup: with(), cmd: cmd(&v1.KickUserRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "carol", BanSeconds: 60, Reason: "spam"})},
		"close_room": {setup: with(), cmd: cmd(&v1.CloseRoomRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Reason: "done"})},
		"set_admin":  {setup: with(), cmd: cmd(&v1.SetAdminRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob"})},
		"remove_admin": {
			setup: with(cmd(&v1.SetAdminRequest{CommandId: "s-adm", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob"})),
			cmd:   cmd(&v1.RemoveAdminRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob"}),
		},
		"mute_seat": {setup: with(), cmd: cmd(&v1.MuteSeatRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Seat: 1})},
		"unmute_seat": {
			setup: with(cmd(&v1.MuteSeatRequest{CommandId: "s-mute", AppCode: "app", RoomId: roomID, UserId: "owner", Seat: 1})),
			cmd:   cmd(&v1.UnmuteSeatRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Seat: 1}),
		},
		"lock_seat": {setup: with(), cmd: cmd(&v1.LockSeatRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Seat: 2})},
		"unlock_seat": {
			setup: with(cmd(&v1.LockSeatRequest{CommandId: "s-lock", AppCode: "app", RoomId: roomID, UserId: "owner", Seat: 2})),
			cmd:   cmd(&v1.UnlockSeatRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Seat: 2}),
		},
		"transfer_owner":          {setup: with(), cmd: cmd(&v1.TransferOwnerRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob"})},
		"update_room":             {setup: with(), cmd: cmd(&v1.UpdateRoomRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Name: "New name", Announcement: proto.String("hello")})},
		"set_seat_mode":           {setup: with(), cmd: cmd(&v1.SetSeatModeRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", SeatMode: "apply"})},
		"apply_seat":              {setup: with(applyMode), cmd: cmd(&v1.ApplySeatRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "bob", Seat: 1, TimeoutSeconds: 100})},
		"cancel_seat_application": {setup: with(applyMode, bobApplied), cmd: cmd(&v1.CancelSeatApplicationRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "bob"})},
		"approve_seat_application": {setup: with(applyMode, bobApplied),
			cmd: cmd(&v1.ApproveSeatApplicationRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob"})},
		"reject_seat_application": {setup: with(applyMode, bobApplied),
			cmd: cmd(&v1.RejectSeatApplicationRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob"})},
		"invite_to_seat":          {setup: with(), cmd: cmd(&v1.InviteToSeatRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob", Seat: 2, TimeoutSeconds: 100})},
		"accept_seat_invitation":  {setup: with(bobInvited), cmd: cmd(&v1.AcceptSeatInvitationRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "bob"})},
		"decline_seat_invitation": {setup: with(bobInvited), cmd: cmd(&v1.DeclineSeatInvitationRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "bob"})},
		"kick_off_seat":           {setup: with(bobSeated), cmd: cmd(&v1.KickOffSeatRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob"})},
		"move_seat":               {setup: with(bobSeated), cmd: cmd(&v1.MoveSeatRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob", Seat: 3})},
		"ban_user":                {setup: with(), cmd: cmd(&v1.BanUserRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "dave", BanSeconds: 60, Reason: "spam"})},
		"unban_user": {setup: with(cmd(&v1.BanUserRequest{CommandId: "s-ban", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "dave", BanSeconds: 3600})),
			cmd: cmd(&v1.UnbanUserRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "dave"})},
		"mute_member": {setup: with(), cmd: cmd(&v1.MuteMemberRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob", MuteSeconds: 60})},
		"unmute_member": {setup: with(cmd(&v1.MuteMemberRequest{CommandId: "s-mutem", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob", MuteSeconds: 3600})),
			cmd: cmd(&v1.UnmuteMemberRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", TargetUserId: "bob"})},
		"set_seat_count": {setup: with(), cmd: cmd(&v1.SetSeatCountRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", MicSeats: 12})},
		"reopen_room": {setup: with(cmd(&v1.CloseRoomRequest{CommandId: "s-close", AppCode: "app", RoomId: roomID, UserId: "owner"})),
			cmd: cmd(&v1.ReopenRoomRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Name: "Again"})},
		"audio_presence": {setup: with(bobSeated), cmd: cmd(&v1.AudioPresenceRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "bob",
			Kind: "enter", EventTimeMs: 1_700_000_000_000, Reason: "r", SeatGraceMs: 10_000})},
		"set_room_metadata": {setup: with(), cmd: cmd(&v1.SetRoomMetadataRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner",
			Category: "music", Tags: []string{"jazz"}, CoverUrl: "https://cdn/x.png", Visibility: "unlisted"})},
		"set_room_custom_info": {setup: with(), cmd: cmd(&v1.SetRoomCustomInfoRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner",
			Set: map[string]string{"theme": "dark"}, DeleteKeys: []string{"pin"}})},
		"set_chat_disabled":  {setup: with(), cmd: cmd(&v1.SetChatDisabledRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Disabled: true})},
		"set_all_mics_muted": {setup: with(), cmd: cmd(&v1.SetAllMicsMutedRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Muted: true})},
		"like_room":          {setup: with(), cmd: cmd(&v1.LikeRoomRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "bob", Count: 3})},
		"set_room_password": {setup: with(), cmd: cmd(&v1.SetRoomPasswordRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner",
			Password: "pw"})},
	}
}

// variants returns rc with each of its request fields changed in turn
// (command_id, request_id and the room address excepted), named by field.
func variants(rc *v1.RoomCommand) map[string]*v1.RoomCommand {
	out := map[string]*v1.RoomCommand{}
	var inner protoreflect.Message
	rc.ProtoReflect().Range(func(_ protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		inner = v.Message()
		return false
	})
	fields := inner.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		switch f.Name() {
		case "command_id", "request_id", "app_code", "room_id":
			continue
		}
		c := proto.Clone(rc).(*v1.RoomCommand)
		var m protoreflect.Message
		c.ProtoReflect().Range(func(_ protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			m = v.Message()
			return false
		})
		cf := m.Descriptor().Fields().ByName(f.Name())
		switch {
		case cf.IsList():
			m.Mutable(cf).List().Append(protoreflect.ValueOfString("someone-else"))
		case cf.IsMap():
			m.Mutable(cf).Map().Set(protoreflect.ValueOfString("other-key").MapKey(), protoreflect.ValueOfString("other"))
		case cf.Kind() == protoreflect.StringKind:
			m.Set(cf, protoreflect.ValueOfString(m.Get(cf).String()+"-other"))
		case cf.Kind() == protoreflect.Int32Kind:
			m.Set(cf, protoreflect.ValueOfInt32(int32(m.Get(cf).Int())+1))
		case cf.Kind() == protoreflect.Int64Kind:
			m.Set(cf, protoreflect.ValueOfInt64(m.Get(cf).Int()+1))
		case cf.Kind() == protoreflect.BoolKind:
			m.Set(cf, protoreflect.ValueOfBool(!m.Get(cf).Bool()))
		default:
			panic(fmt.Sprintf("variants: no rule for field %s of kind %s", cf.FullName(), cf.Kind()))
		}
		out[string(f.Name())] = c
	}
	return out
}

// TestIdempotencyKeyBoundToRequestEveryCommandType reuses a command_id with
// every single field changed, and with another command type, for every
// logged command type, on go-memdb and MariaDB: each reuse must answer
// AlreadyExists naming the conflict, write nothing and charge nothing,
// while the same request again gets the recorded reply, both in the live
// activation and in a new one that only has the log (after a snapshot,
// so the key is not in its replayed tail either).
func TestIdempotencyKeyBoundToRequestEveryCommandType(t *testing.T) {
	// Every command type of RoomCommand that is logged must have a case.
	covered := idemCases("r")
	od := (&v1.RoomCommand{}).ProtoReflect().Descriptor().Oneofs().ByName("command")
	for i := 0; i < od.Fields().Len(); i++ {
		name := string(od.Fields().Get(i).Name())
		if _, ok := covered[name]; !ok && name != "get_room" && name != "list_bans" && name != "get_join_ticket" && name != "list_contributors" && name != "heartbeat" {
			t.Errorf("command type %s has no idempotency case: add one to idemCases", name)
		}
	}
	stores := bothStores()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			for name := range covered {
				t.Run(name, func(t *testing.T) {
					f := newFixture(t)
					f.deps.Store = store
					f.deps.Config.SnapshotEvery = 0
					f.deps.Config.PasswordKey = strings.Repeat("k", 32) // SetRoomPassword's
					roomID := "idem-" + name
					runIdemCase(t, f, store, roomID, idemCases(roomID)[name])
				})
			}
		})
	}
}

func runIdemCase(t *testing.T, f *fixture, store Store, roomID string, c idemCase) {
	key := persistence.RoomKey{AppCode: "app", RoomID: roomID}
	pid := f.activate("app/" + roomID)
	for _, s := range c.setup {
		f.mustDo(pid, s)
	}
	first := f.mustDo(pid, c.cmd)
	logLen := func() int {
		recs, err := store.LoadCommands(context.Background(), key, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	want := logLen()
	other := &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "zed"}}}
	if c.cmd.GetJoinRoom() != nil {
		other = &v1.RoomCommand{Command: &v1.RoomCommand_TakeMic{TakeMic: &v1.TakeMicRequest{CommandId: "X", AppCode: "app", RoomId: roomID, UserId: "owner", Seat: 2}}}
	}
	conflicts := variants(c.cmd)
	conflicts["another command type"] = other
	round := func(phase string, do func(*v1.RoomCommand) (*v1.CommandReply, error)) {
		t.Helper()
		for field, v := range conflicts {
			r, err := do(v)
			if !errors.Is(err, errclass.Exists) || !strings.Contains(err.Error(), `"X"`) {
				t.Fatalf("%s: command_id reused with a different %s: got reply %v, error %v; want AlreadyExists naming the command_id", phase, field, r, err)
			}
		}
		if n := logLen(); n != want {
			t.Fatalf("%s: log has %d records after the conflicting reuses, want %d", phase, n, want)
		}
		again, err := do(c.cmd)
		if err != nil || !again.Duplicate || again.RoomSeq != first.RoomSeq {
			t.Fatalf("%s: same request again: got %+v, %v; want the recorded reply (seq %d) marked duplicate", phase, again, err, first.RoomSeq)
		}
		if n := f.wallet.calls["X"]; c.cmd.GetSendGift() != nil && n != 1 {
			t.Fatalf("%s: wallet charged %d times under X, want 1", phase, n)
		}
	}
	round("live", func(rc *v1.RoomCommand) (*v1.CommandReply, error) { return f.do(pid, rc) })

	// Stopping flushes a snapshot at the head, so the next activation
	// replays no tail and knows X only from the store.
	if err := f.sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if snap, err := store.LoadSnapshot(context.Background(), key); err != nil || snap.Seq != first.RoomSeq {
		t.Fatalf("snapshot after stop: seq %d, %v; want seq %d", snap.Seq, err, first.RoomSeq)
	}
	pid2 := f.activate("app/" + roomID)
	round("after restart", func(rc *v1.RoomCommand) (*v1.CommandReply, error) { return f.do(pid2, rc) })
}
