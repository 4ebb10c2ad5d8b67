package grpcapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

func validCreate() *roomcellv1.CreateRoomRequest {
	return &roomcellv1.CreateRoomRequest{
		CommandId: "c1", AppCode: "app1", RoomId: "r1", UserId: "u1",
		Name: "Lobby 大厅", MicSeats: 8, AdminUserIds: []string{"u2", "u3"},
	}
}

// rpcCase is one RPC called through a real client, with the command the
// backend must receive (request_id as the test's metadata sets it).
type rpcCase struct {
	name string
	call func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error)
	want *roomcellv1.RoomCommand
}

func happyCases() []rpcCase {
	const rid = "req-test-1"
	cases := []rpcCase{
		{"CreateRoom",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.CreateRoom(ctx, validCreate())
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CreateRoom{CreateRoom: &roomcellv1.CreateRoomRequest{
				CommandId: "c1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1",
				Name: "Lobby 大厅", MicSeats: 8, AdminUserIds: []string{"u2", "u3"}}}}},
		{"JoinRoom",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.JoinRoom(ctx, &roomcellv1.JoinRoomRequest{CommandId: "c2", AppCode: "app1", RoomId: "r1", UserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_JoinRoom{JoinRoom: &roomcellv1.JoinRoomRequest{
				CommandId: "c2", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2"}}}},
		{"LeaveRoom",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.LeaveRoom(ctx, &roomcellv1.LeaveRoomRequest{CommandId: "c3", AppCode: "app1", RoomId: "r1", UserId: "u2", Reason: "bye"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LeaveRoom{LeaveRoom: &roomcellv1.LeaveRoomRequest{
				CommandId: "c3", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2", Reason: "bye"}}}},
		{"TakeMic",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.TakeMic(ctx, &roomcellv1.TakeMicRequest{CommandId: "c4", AppCode: "app1", RoomId: "r1", UserId: "u2", Seat: 19})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_TakeMic{TakeMic: &roomcellv1.TakeMicRequest{
				CommandId: "c4", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2", Seat: 19}}}},
		{"ReleaseMic",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.ReleaseMic(ctx, &roomcellv1.ReleaseMicRequest{CommandId: "c5", AppCode: "app1", RoomId: "r1", UserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ReleaseMic{ReleaseMic: &roomcellv1.ReleaseMicRequest{
				CommandId: "c5", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2"}}}},
		{"SendGift",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.SendGift(ctx, &roomcellv1.SendGiftRequest{CommandId: "c6", AppCode: "app1", RoomId: "r1", UserId: "u2",
					ToUserId: "u1", GiftId: "rose", GiftCount: 1_000_000})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SendGift{SendGift: &roomcellv1.SendGiftRequest{
				CommandId: "c6", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2",
				ToUserId: "u1", GiftId: "rose", GiftCount: 1_000_000}}}},
		{"KickUser",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.KickUser(ctx, &roomcellv1.KickUserRequest{CommandId: "c7", AppCode: "app1", RoomId: "r1", UserId: "u1",
					TargetUserId: "u2", BanSeconds: 3600, Reason: "spam"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_KickUser{KickUser: &roomcellv1.KickUserRequest{
				CommandId: "c7", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1",
				TargetUserId: "u2", BanSeconds: 3600, Reason: "spam"}}}},
		{"CloseRoom",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.CloseRoom(ctx, &roomcellv1.CloseRoomRequest{CommandId: "c8", AppCode: "app1", RoomId: "r1", UserId: "u1", Reason: "night"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CloseRoom{CloseRoom: &roomcellv1.CloseRoomRequest{
				CommandId: "c8", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Reason: "night"}}}},
		{"Heartbeat without command_id",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.Heartbeat(ctx, &roomcellv1.HeartbeatRequest{AppCode: "app1", RoomId: "r1", UserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_Heartbeat{Heartbeat: &roomcellv1.HeartbeatRequest{
				RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2"}}}},
		{"SetAdmin",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.SetAdmin(ctx, &roomcellv1.SetAdminRequest{CommandId: "c9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetAdmin{SetAdmin: &roomcellv1.SetAdminRequest{
				CommandId: "c9", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{"RemoveAdmin",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.RemoveAdmin(ctx, &roomcellv1.RemoveAdminRequest{CommandId: "c10", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_RemoveAdmin{RemoveAdmin: &roomcellv1.RemoveAdminRequest{
				CommandId: "c10", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{"MuteSeat",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.MuteSeat(ctx, &roomcellv1.MuteSeatRequest{CommandId: "c11", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 3})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MuteSeat{MuteSeat: &roomcellv1.MuteSeatRequest{
				CommandId: "c11", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 3}}}},
		{"UnmuteSeat",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.UnmuteSeat(ctx, &roomcellv1.UnmuteSeatRequest{CommandId: "c12", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 0})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnmuteSeat{UnmuteSeat: &roomcellv1.UnmuteSeatRequest{
				CommandId: "c12", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1"}}}},
		{"LockSeat",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.LockSeat(ctx, &roomcellv1.LockSeatRequest{CommandId: "c13", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 19})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LockSeat{LockSeat: &roomcellv1.LockSeatRequest{
				CommandId: "c13", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 19}}}},
		{"UnlockSeat",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.UnlockSeat(ctx, &roomcellv1.UnlockSeatRequest{CommandId: "c14", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 1})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnlockSeat{UnlockSeat: &roomcellv1.UnlockSeatRequest{
				CommandId: "c14", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 1}}}},
		{"UpdateRoom with an announcement that breaks lines",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.UpdateRoom(ctx, &roomcellv1.UpdateRoomRequest{CommandId: "c15", AppCode: "app1", RoomId: "r1", UserId: "u1",
					Name: "新", Announcement: proto.String("a\nb")})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UpdateRoom{UpdateRoom: &roomcellv1.UpdateRoomRequest{
				CommandId: "c15", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Name: "新", Announcement: proto.String("a\nb")}}}},
		{"TransferOwner",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.TransferOwner(ctx, &roomcellv1.TransferOwnerRequest{CommandId: "c18", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_TransferOwner{TransferOwner: &roomcellv1.TransferOwnerRequest{
				CommandId: "c18", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{"LeaveRoom with an ordinary reason",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.LeaveRoom(ctx, &roomcellv1.LeaveRoomRequest{CommandId: "c16", AppCode: "app1", RoomId: "r1", UserId: "u2", Reason: room.ReasonLeft})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LeaveRoom{LeaveRoom: &roomcellv1.LeaveRoomRequest{
				CommandId: "c16", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2", Reason: room.ReasonLeft}}}},
		{"GetJoinTicket",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.GetJoinTicket(ctx, &roomcellv1.GetJoinTicketRequest{AppCode: "app1", RoomId: "r1", UserId: "u1"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_GetJoinTicket{GetJoinTicket: &roomcellv1.GetJoinTicketRequest{
				RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1"}}}},
		{"GetRoom",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "app1", RoomId: "r1"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_GetRoom{GetRoom: &roomcellv1.GetRoomRequest{
				RequestId: rid, AppCode: "app1", RoomId: "r1"}}}},
	}
	return append(append(cases, seatRequestCases(rid)...), rankingCases(rid)...)
}

func TestRoomRPCsReachBackend(t *testing.T) {
	for _, tc := range happyCases() {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{}
			client := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, b))
			ctx := metadata.AppendToOutgoingContext(testCtx(t), RequestIDHeader, "req-test-1")
			got, err := tc.call(ctx, client)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			calls := b.calls()
			if len(calls) != 1 {
				t.Fatalf("backend called %d times, want 1", len(calls))
			}
			if !proto.Equal(calls[0], tc.want) {
				t.Fatalf("backend got\n %v\nwant\n %v", calls[0], tc.want)
			}
			var want proto.Message = cannedReply()
			switch tc.name {
			case "GetRoom":
				want = &roomcellv1.GetRoomReply{Room: cannedReply().GetRoom()}
			case "ListBans":
				want = &roomcellv1.ListBansReply{RoomSeq: cannedReply().GetRoomSeq()}
			case "ListContributors":
				want = &roomcellv1.ListContributorsReply{RoomSeq: cannedReply().GetRoomSeq(), Period: "day"}
			case "GetJoinTicket":
				// No signer on this server: the room and the rights only.
				want = &roomcellv1.GetJoinTicketReply{TrtcRoomId: "app1_r1", Privileges: 2 | 4 | 8, SendAudio: true, RoomSeq: cannedReply().GetRoomSeq()}
			case "ListSeatRequests":
				want = &roomcellv1.ListSeatRequestsReply{SeatMode: cannedReply().GetRoom().GetSeatMode(), RoomSeq: cannedReply().GetRoom().GetSeq()}
			}
			if !proto.Equal(got, want) {
				t.Fatalf("reply\n %v\nwant\n %v", got, want)
			}
		})
	}
}

func TestRequestIDFromBodyWins(t *testing.T) {
	b := &fakeBackend{}
	client := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, b))
	ctx := metadata.AppendToOutgoingContext(testCtx(t), RequestIDHeader, "from-header")
	if _, err := client.JoinRoom(ctx, &roomcellv1.JoinRoomRequest{
		CommandId: "c1", RequestId: "from-body", AppCode: "a", RoomId: "r", UserId: "u"}); err != nil {
		t.Fatal(err)
	}
	if got := b.calls()[0].GetJoinRoom().GetRequestId(); got != "from-body" {
		t.Fatalf("request_id %q, want the body's from-body", got)
	}
}

func TestRequestIDGeneratedAndEchoed(t *testing.T) {
	for _, tc := range []struct{ name, header string }{
		{"no header", ""},
		{"unusable header", "has space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fakeBackend{}
			client := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, b))
			ctx := testCtx(t)
			if tc.header != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, RequestIDHeader, tc.header)
			}
			var hdr metadata.MD
			if _, err := client.JoinRoom(ctx, &roomcellv1.JoinRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "u"},
				grpc.Header(&hdr)); err != nil {
				t.Fatal(err)
			}
			echoed := hdr.Get(RequestIDHeader)
			if len(echoed) != 1 || echoed[0] == "" || echoed[0] == tc.header {
				t.Fatalf("echoed request id %q, want one fresh id", echoed)
			}
			if got := b.calls()[0].GetJoinRoom().GetRequestId(); got != echoed[0] {
				t.Fatalf("backend request_id %q, echoed %q", got, echoed[0])
			}
		})
	}
}

func TestRequestIDHeaderEchoed(t *testing.T) {
	client := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, &fakeBackend{}))
	ctx := metadata.AppendToOutgoingContext(testCtx(t), RequestIDHeader, "trace-42")
	var hdr metadata.MD
	if _, err := client.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "a", RoomId: "r"}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get(RequestIDHeader); len(got) != 1 || got[0] != "trace-42" {
		t.Fatalf("echoed %q, want [trace-42]", got)
	}
}

func TestGetRoomWithoutViewIsNotFound(t *testing.T) {
	b := &fakeBackend{reply: func(context.Context, *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		return &roomcellv1.CommandReply{}, nil
	}}
	client := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, b))
	_, err := client.GetRoom(testCtx(t), &roomcellv1.GetRoomRequest{AppCode: "a", RoomId: "r"})
	assertCode(t, err, codes.NotFound)
}

func TestCommandTimeoutBoundsBackend(t *testing.T) {
	b := &fakeBackend{reply: func(ctx context.Context, _ *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	s := NewRoomServer(b, discardLogger(), 20*time.Millisecond)
	_, err := s.JoinRoom(context.Background(), &roomcellv1.JoinRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "u"})
	assertCode(t, err, codes.DeadlineExceeded)
}

// The backend gets the earlier of the caller's deadline and the command
// timeout.
func TestCommandTimeoutTakesTheEarlierDeadline(t *testing.T) {
	var got time.Time
	b := &fakeBackend{reply: func(ctx context.Context, _ *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		got, _ = ctx.Deadline()
		return cannedReply(), nil
	}}
	s := NewRoomServer(b, discardLogger(), time.Minute)
	for _, tc := range []struct {
		name   string
		caller time.Duration // 0: no deadline
		want   time.Duration
	}{
		{"no caller deadline", 0, time.Minute},
		{"caller's later", time.Hour, time.Minute},
		{"caller's earlier", time.Second, time.Second},
	} {
		ctx := context.Background()
		if tc.caller > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tc.caller)
			defer cancel()
		}
		start := time.Now()
		if _, err := s.JoinRoom(ctx, joinReq()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if left := got.Sub(start); left < tc.want-time.Second/2 || left > tc.want+time.Second/2 {
			t.Errorf("%s: backend deadline in %v, want %v", tc.name, left, tc.want)
		}
	}
}

// Every command RPC of RoomService is served (not left to
// Unimplemented) and has a row above; ListRooms and GetUserRoom are the
// directory's (directory_test.go), ListRoomEvents and WatchRoom the event
// log's (events_test.go), LikeStream, LikeRoom over a stream, its own
// (likestream_test.go).
func TestEveryRoomRPCHasAHappyCase(t *testing.T) {
	rows := map[string]bool{}
	for _, tc := range happyCases() {
		rows[strings.Fields(tc.name)[0]] = true
	}
	methods := roomcellv1.File_roomcellv1_room_proto.Services().ByName("RoomService").Methods()
	for i := range methods.Len() {
		name := string(methods.Get(i).Name())
		if name == "ListRooms" || name == "GetUserRoom" || name == "ListRoomEvents" || name == "WatchRoom" || name == "ListGifts" || name == "LikeStream" {
			continue
		}
		if !rows[name] {
			t.Errorf("RoomService.%s has no happy case", name)
		}
	}
}

// GetRoom's page is checked before the room is asked (InvalidArgument,
// naming the field), and the room's next page token reaches the caller.
func TestGetRoomPageArgumentsAndToken(t *testing.T) {
	b := &fakeBackend{reply: func(context.Context, *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		r := cannedReply()
		r.NextPageToken = "dTI"
		return r, nil
	}}
	client := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, b))
	for _, tc := range []struct {
		name, token, field string
		size               int32
	}{
		{"negative size", "", "page_size", -1},
		{"size over the max", "", "page_size", room.MaxMembersPageSize + 1},
		{"token not base64", "%%", "page_token", 10},
		{"token of a bad id", "YSBi", "page_token", 10}, // "a b"
	} {
		_, err := client.GetRoom(testCtx(t), &roomcellv1.GetRoomRequest{AppCode: "a", RoomId: "r", PageSize: tc.size, PageToken: tc.token})
		assertCode(t, err, codes.InvalidArgument)
		if !strings.Contains(status.Convert(err).Message(), tc.field) {
			t.Errorf("%s: message %q does not name %s", tc.name, status.Convert(err).Message(), tc.field)
		}
	}
	if n := len(b.calls()); n != 0 {
		t.Fatalf("bad pages reached the room %d times", n)
	}
	got, err := client.GetRoom(testCtx(t), &roomcellv1.GetRoomRequest{AppCode: "a", RoomId: "r", PageSize: 2, PageToken: "dTE"})
	if err != nil || got.NextPageToken != "dTI" || len(got.Room.Members) != 2 {
		t.Fatalf("page: %v %v, want the room's page and its next token", got, err)
	}
	if c := b.calls()[0].GetGetRoom(); c.PageSize != 2 || c.PageToken != "dTE" {
		t.Fatalf("room asked for %v, want the caller's page", c)
	}
}

// boundedBackend is a BoundedBackend that records the bound it was given
// and the deadline of the context it got.
type boundedBackend struct {
	within   time.Duration
	deadline bool
}

func (b *boundedBackend) Execute(context.Context, *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	return nil, errors.New("Execute called on a bounded backend")
}

func (b *boundedBackend) ExecuteWithin(ctx context.Context, _ *roomcellv1.RoomCommand, within time.Duration) (*roomcellv1.CommandReply, error) {
	b.within = within
	_, b.deadline = ctx.Deadline()
	return cannedReply(), nil
}

// A backend that bounds its own calls (roomgrain.Client) is handed the
// command timeout rather than a context with a timer of its own per
// call; the caller's own context reaches it unchanged.
func TestCommandTimeoutHandedToBoundedBackend(t *testing.T) {
	b := &boundedBackend{}
	s := NewRoomServer(b, discardLogger(), 1500*time.Millisecond)
	if _, err := s.JoinRoom(context.Background(), joinReq()); err != nil {
		t.Fatal(err)
	}
	if b.within != 1500*time.Millisecond || b.deadline {
		t.Fatalf("backend got within %v, a deadline %v; want the command timeout and the caller's context (none)", b.within, b.deadline)
	}
}
