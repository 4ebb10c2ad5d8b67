package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/room"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/grpcapi"
)

// roomTestBackend records the commands roomctl's requests turn into.
type roomTestBackend struct {
	mu  sync.Mutex
	got []*roomcellv1.RoomCommand
	dup bool
	// flakyCreates: the first CreateRoom of each room answers Unavailable.
	flakyCreates bool
	created      map[string]bool
	// notMember: every command answers ErrNotMember.
	notMember bool
}

func (b *roomTestBackend) Execute(_ context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, proto.Clone(cmd).(*roomcellv1.RoomCommand))
	if b.notMember {
		return nil, room.ErrNotMember
	}
	if c := cmd.GetCreateRoom(); c != nil && b.flakyCreates && !b.created[c.RoomId] {
		if b.created == nil {
			b.created = map[string]bool{}
		}
		b.created[c.RoomId] = true
		return nil, errclass.Unavailable
	}
	reply := &roomcellv1.CommandReply{
		RoomSeq:   3,
		EventIds:  []string{"ev-3-0"},
		Events:    []*roomcellv1.RoomEvent{{EventId: "ev-3-0", EventType: "RoomUserJoined", Payload: `{"user_id":"u2"}`}},
		Duplicate: b.dup,
		Room: &roomcellv1.RoomView{
			AppCode: "app1", RoomId: "r1", OwnerUserId: "u1", Name: "Lobby", Status: "open", Seq: 3,
			MemberCount: 2, Seats: []*roomcellv1.Seat{{Seat: 0, UserId: "u2", Muted: true}, {Seat: 1, Locked: true}},
			AdminUserIds: []string{"u9"}, Heat: 120, Announcement: "be nice\nno spam",
		},
	}
	if cmd.GetGetJoinTicket() != nil { // a read: the rights only
		return &roomcellv1.CommandReply{RoomSeq: 3, JoinRights: &roomcellv1.JoinRights{SendAudio: true, Seat: 2}}, nil
	}
	if g := cmd.GetGetRoom(); g != nil { // a page of members, as the room answers
		reply.Room.Members = []string{"u1", "u2"}
		if g.PageSize == 1 {
			reply.Room.Members, reply.NextPageToken = reply.Room.Members[:1], "dTE"
		}
	}
	return reply, nil
}

func (b *roomTestBackend) last(t *testing.T) *roomcellv1.RoomCommand {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got) == 0 {
		t.Fatal("backend got no command")
	}
	return b.got[len(b.got)-1]
}

func (b *roomTestBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.got)
}

// startRoomTestServer serves the real RoomServer on a loopback port; roomctl
// dials addresses, so an in-memory listener will not do.
func startRoomTestServer(t *testing.T) (string, *roomTestBackend) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: log})
	b := &roomTestBackend{}
	rs := grpcapi.NewRoomServer(b, log, 0)
	rs.SetLikeStreams(grpcapi.LikeStreamOptions{Max: 10})
	roomcellv1.RegisterRoomServiceServer(srv, rs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), b
}

func runCtl(t *testing.T, addr string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"--addr", addr, "--token", "", "--timeout", "5s"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRoomctlCreateHuman(t *testing.T) {
	addr, b := startRoomTestServer(t)
	code, out, errOut := runCtl(t, addr, "create", "--app", "app1", "--room", "r1", "--user", "u1",
		"--name", "Lobby", "--seats", "10", "--admins", "u9,u8", "--command-id", "cmd-1")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := &roomcellv1.CreateRoomRequest{CommandId: "cmd-1", AppCode: "app1", RoomId: "r1", UserId: "u1",
		Name: "Lobby", MicSeats: 10, AdminUserIds: []string{"u9", "u8"}}
	got := b.last(t).GetCreateRoom()
	got.RequestId = "" // filled by the server
	if !proto.Equal(got, want) {
		t.Fatalf("server got %v, want %v", got, want)
	}
	for _, line := range []string{
		"seq 3  command_id cmd-1  duplicate no",
		"events: ev-3-0",
		`room app1/r1 "Lobby"  owner u1  status open  seq 3  heat 120`,
		"admins: u9",
		"members: 2 (roomctl get lists them)",
		`events: ev-3-0 RoomUserJoined {"user_id":"u2"}`,
		`announcement: "be nice\nno spam"`,
		"seats: 0:u2(muted) 1:-(locked)",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}
}

func TestRoomctlGeneratesCommandIDs(t *testing.T) {
	addr, b := startRoomTestServer(t)
	var ids []string
	for range 2 {
		if code, _, errOut := runCtl(t, addr, "join", "--app", "app1", "--room", "r1", "--user", "u2"); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		ids = append(ids, b.last(t).GetJoinRoom().GetCommandId())
	}
	if ids[0] == "" || ids[0] == ids[1] {
		t.Fatalf("generated command ids %q: want two different non-empty ids", ids)
	}
}

func TestRoomctlSubcommandsMapFlags(t *testing.T) {
	addr, b := startRoomTestServer(t)
	base := []string{"--app", "app1", "--room", "r1", "--user", "u1", "--command-id", "c9"}
	cases := []struct {
		args []string
		want *roomcellv1.RoomCommand
	}{
		{[]string{"mic", "take", "--seat", "5"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_TakeMic{TakeMic: &roomcellv1.TakeMicRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 5}}}},
		{[]string{"mic", "release"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ReleaseMic{ReleaseMic: &roomcellv1.ReleaseMicRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1"}}}},
		{[]string{"gift", "--to", "u2", "--gift", "rose", "--count", "3"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SendGift{SendGift: &roomcellv1.SendGiftRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", ToUserId: "u2", GiftId: "rose", GiftCount: 3}}}},
		{[]string{"kick", "--target", "u2", "--ban", "600", "--reason", "spam"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_KickUser{KickUser: &roomcellv1.KickUserRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", BanSeconds: 600, Reason: "spam"}}}},
		{[]string{"leave", "--reason", "bye"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LeaveRoom{LeaveRoom: &roomcellv1.LeaveRoomRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Reason: "bye"}}}},
		{[]string{"close", "--reason", "night"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CloseRoom{CloseRoom: &roomcellv1.CloseRoomRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Reason: "night"}}}},
		{[]string{"heartbeat"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_Heartbeat{Heartbeat: &roomcellv1.HeartbeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1"}}}},
		{[]string{"admin", "set", "--target", "u2"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetAdmin{SetAdmin: &roomcellv1.SetAdminRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{[]string{"admin", "remove", "--target", "u2"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_RemoveAdmin{RemoveAdmin: &roomcellv1.RemoveAdminRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{[]string{"seat", "mute", "--seat", "3"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MuteSeat{MuteSeat: &roomcellv1.MuteSeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 3}}}},
		{[]string{"seat", "unmute", "--seat", "0"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnmuteSeat{UnmuteSeat: &roomcellv1.UnmuteSeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 0}}}},
		{[]string{"seat", "lock", "--seat", "7"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LockSeat{LockSeat: &roomcellv1.LockSeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 7}}}},
		{[]string{"seat", "unlock", "--seat", "7"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnlockSeat{UnlockSeat: &roomcellv1.UnlockSeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 7}}}},
		{[]string{"update", "--name", "Lounge"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UpdateRoom{UpdateRoom: &roomcellv1.UpdateRoomRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Name: "Lounge"}}}},
		{[]string{"update", "--announcement", ""}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UpdateRoom{UpdateRoom: &roomcellv1.UpdateRoomRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Announcement: proto.String("")}}}},
		{[]string{"seat", "mode", "--mode", "apply"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetSeatMode{SetSeatMode: &roomcellv1.SetSeatModeRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", SeatMode: "apply"}}}},
		{[]string{"seat", "apply", "--seat", "2", "--expire-after", "30"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ApplySeat{ApplySeat: &roomcellv1.ApplySeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 2, TimeoutSeconds: 30}}}},
		{[]string{"seat", "cancel"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CancelSeatApplication{CancelSeatApplication: &roomcellv1.CancelSeatApplicationRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1"}}}},
		{[]string{"seat", "approve", "--target", "u2"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ApproveSeatApplication{ApproveSeatApplication: &roomcellv1.ApproveSeatApplicationRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{[]string{"seat", "reject", "--target", "u2"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_RejectSeatApplication{RejectSeatApplication: &roomcellv1.RejectSeatApplicationRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{[]string{"seat", "invite", "--target", "u2", "--seat", "4"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_InviteToSeat{InviteToSeat: &roomcellv1.InviteToSeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", Seat: 4}}}},
		{[]string{"seat", "accept"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_AcceptSeatInvitation{AcceptSeatInvitation: &roomcellv1.AcceptSeatInvitationRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1"}}}},
		{[]string{"seat", "kick", "--target", "u2"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_KickOffSeat{KickOffSeat: &roomcellv1.KickOffSeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{[]string{"seat", "move", "--seat", "6"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MoveSeat{MoveSeat: &roomcellv1.MoveSeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 6}}}},
		{[]string{"seat", "move", "--seat", "2", "--target", "u2", "--policy", "swap"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MoveSeat{MoveSeat: &roomcellv1.MoveSeatRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 2, TargetUserId: "u2", Policy: "swap"}}}},
		{[]string{"seat", "count", "--seats", "12"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetSeatCount{SetSeatCount: &roomcellv1.SetSeatCountRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", MicSeats: 12}}}},
		{[]string{"ban", "--target", "u2", "--ban", "60"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_BanUser{BanUser: &roomcellv1.BanUserRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", BanSeconds: 60}}}},
		{[]string{"ban", "--targets", "u2,u3", "--ban", "60", "--reason", "raid"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_BanUser{BanUser: &roomcellv1.BanUserRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserIds: []string{"u2", "u3"}, BanSeconds: 60, Reason: "raid"}}}},
		{[]string{"unban", "--target", "u2"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnbanUser{UnbanUser: &roomcellv1.UnbanUserRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{[]string{"member", "mute", "--target", "u2", "--seconds", "30"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MuteMember{MuteMember: &roomcellv1.MuteMemberRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", MuteSeconds: 30}}}},
		{[]string{"member", "unmute", "--target", "u2"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnmuteMember{UnmuteMember: &roomcellv1.UnmuteMemberRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{[]string{"meta", "--category", "music", "--tags", "jazz,chill", "--cover", "https://c/x.png", "--visibility", "unlisted"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomMetadata{SetRoomMetadata: &roomcellv1.SetRoomMetadataRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Category: "music", Tags: []string{"jazz", "chill"}, CoverUrl: "https://c/x.png", Visibility: "unlisted"}}}},
		{[]string{"info", "--set", "theme=dark,lang=zh", "--delete", "pin"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomCustomInfo{SetRoomCustomInfo: &roomcellv1.SetRoomCustomInfoRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Set: map[string]string{"theme": "dark", "lang": "zh"}, DeleteKeys: []string{"pin"}}}}},
		{[]string{"password", "--password", "pw1"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomPassword{SetRoomPassword: &roomcellv1.SetRoomPasswordRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Password: "pw1"}}}},
		{[]string{"chat", "--off"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetChatDisabled{SetChatDisabled: &roomcellv1.SetChatDisabledRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Disabled: true}}}},
		{[]string{"mics", "--on"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetAllMicsMuted{SetAllMicsMuted: &roomcellv1.SetAllMicsMutedRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Muted: true}}}},
		{[]string{"like", "--count", "7"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LikeRoom{LikeRoom: &roomcellv1.LikeRoomRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Count: 7}}}},
		{[]string{"password", "--clear"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomPassword{SetRoomPassword: &roomcellv1.SetRoomPasswordRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Clear: true}}}},
		{[]string{"reopen", "--name", "Again"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ReopenRoom{ReopenRoom: &roomcellv1.ReopenRoomRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", Name: "Again"}}}},
		{[]string{"seat", "decline"}, &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_DeclineSeatInvitation{DeclineSeatInvitation: &roomcellv1.DeclineSeatInvitationRequest{
			CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1"}}}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append(append([]string{}, tc.args...), base...)
			if code, _, errOut := runCtl(t, addr, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			got := b.last(t)
			clearRequestID(got)
			if !proto.Equal(got, tc.want) {
				t.Fatalf("server got %v, want %v", got, tc.want)
			}
		})
	}
}

func clearRequestID(c *roomcellv1.RoomCommand) {
	m := c.ProtoReflect()
	inner := m.Get(m.WhichOneof(m.Descriptor().Oneofs().ByName("command"))).Message()
	inner.Clear(inner.Descriptor().Fields().ByName("request_id"))
}

func TestRoomctlJSON(t *testing.T) {
	addr, b := startRoomTestServer(t)
	b.dup = true
	code, out, errOut := runCtl(t, addr, "--json", "join", "--app", "app1", "--room", "r1", "--user", "u2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var reply roomcellv1.CommandReply
	if err := protojson.Unmarshal([]byte(out), &reply); err != nil {
		t.Fatalf("output is not CommandReply JSON: %v\n%s", err, out)
	}
	if !reply.GetDuplicate() || reply.GetRoomSeq() != 3 || reply.GetRoom().GetHeat() != 120 {
		t.Fatalf("decoded reply %v", &reply)
	}
	if !strings.Contains(out, `"room_seq"`) {
		t.Fatalf("want proto field names in JSON, got %s", out)
	}

	code, out, errOut = runCtl(t, addr, "--json", "get", "--app", "app1", "--room", "r1")
	if code != 0 {
		t.Fatalf("get exit %d: %s", code, errOut)
	}
	var got roomcellv1.GetRoomReply
	if err := protojson.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("get output: %v\n%s", err, out)
	}
	if got.GetRoom().GetOwnerUserId() != "u1" || len(got.GetRoom().GetSeats()) != 2 {
		t.Fatalf("get decoded %v", &got)
	}
}

func TestRoomctlHumanDuplicateAndGet(t *testing.T) {
	addr, b := startRoomTestServer(t)
	b.dup = true
	code, out, errOut := runCtl(t, addr, "heartbeat", "--app", "app1", "--room", "r1", "--user", "u2")
	if code != 0 || !strings.Contains(out, "duplicate yes") {
		t.Fatalf("exit %d, duplicate not shown:\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCtl(t, addr, "get", "--app", "app1", "--room", "r1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "owner u1") || strings.Contains(out, "seq 3  command_id") || !strings.Contains(out, "members (2): u1, u2") {
		t.Fatalf("get output:\n%s", out)
	}
	code, out, errOut = runCtl(t, addr, "get", "--app", "app1", "--room", "r1", "--page-size", "1", "--page-token", "dTA")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if g := b.last(t).GetGetRoom(); g.PageSize != 1 || g.PageToken != "dTA" {
		t.Fatalf("get asked for page %v, want size 1 after token dTA", g)
	}
	for _, line := range []string{"members (1 of 2 on this page): u1", "more members: --page-token dTE"} {
		if !strings.Contains(out, line) {
			t.Errorf("page output lacks %q:\n%s", line, out)
		}
	}
}

func TestRoomctlInvalidArgument(t *testing.T) {
	addr, b := startRoomTestServer(t)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"gift count 0", []string{"gift", "--app", "app1", "--room", "r1", "--user", "u1", "--to", "u2", "--gift", "rose", "--count", "0"},
			1, "roomctl gift: InvalidArgument: gift_count must be between 1 and 1000000, got 0"},
		{"room id with space", []string{"join", "--app", "app1", "--room", "my room", "--user", "u1"},
			1, "roomctl join: InvalidArgument: --room (room_id) has a character that is not allowed"},
		{"missing app", []string{"get", "--room", "r1"},
			2, "roomctl get: --app is required"},
		{"mic take without seat", []string{"mic", "take", "--app", "app1", "--room", "r1", "--user", "u1"},
			2, "roomctl mic take: --seat is required"},
		{"create without name", []string{"create", "--app", "app1", "--room", "r1", "--user", "u1"},
			2, "roomctl create: --name is required"},
		{"join without anything", []string{"join"},
			2, "roomctl join: --app, --room, --user are required"},
		{"update without a change", []string{"update", "--app", "app1", "--room", "r1", "--user", "u1"},
			2, "roomctl update: --name or --announcement is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCtl(t, addr, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out, errOut)
			}
			if !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("stderr %q lacks %q", errOut, tc.stderr)
			}
			if out != "" {
				t.Fatalf("stdout %q on error, want nothing", out)
			}
		})
	}
	if n := b.count(); n != 0 {
		t.Fatalf("backend got %d commands from bad input", n)
	}
}
