package grpcapi

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

var (
	longID     = strings.Repeat("x", room.MaxIDLen+1)
	longName   = strings.Repeat("名", room.MaxNameLen/3+1) // multi-byte: the limit is in bytes
	longReason = strings.Repeat("r", room.MaxReasonLen+1)
)

type badCase struct {
	name  string
	field string // the status message must name it
	call  func(ctx context.Context, c roomcellv1.RoomServiceClient) error
}

func create(mut func(r *roomcellv1.CreateRoomRequest)) func(context.Context, roomcellv1.RoomServiceClient) error {
	return func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
		r := validCreate()
		mut(r)
		_, err := c.CreateRoom(ctx, r)
		return err
	}
}

func join(mut func(r *roomcellv1.JoinRoomRequest)) func(context.Context, roomcellv1.RoomServiceClient) error {
	return func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
		r := &roomcellv1.JoinRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "u"}
		mut(r)
		_, err := c.JoinRoom(ctx, r)
		return err
	}
}

func gift(mut func(r *roomcellv1.SendGiftRequest)) func(context.Context, roomcellv1.RoomServiceClient) error {
	return func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
		r := &roomcellv1.SendGiftRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "u", ToUserId: "v", GiftId: "rose", GiftCount: 1}
		mut(r)
		_, err := c.SendGift(ctx, r)
		return err
	}
}

func kick(mut func(r *roomcellv1.KickUserRequest)) func(context.Context, roomcellv1.RoomServiceClient) error {
	return func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
		r := &roomcellv1.KickUserRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "u", TargetUserId: "v"}
		mut(r)
		_, err := c.KickUser(ctx, r)
		return err
	}
}

func badInputCases() []badCase {
	return []badCase{
		// Identifiers, shown once per field on CreateRoom and JoinRoom.
		{"create empty command_id", "command_id", create(func(r *roomcellv1.CreateRoomRequest) { r.CommandId = "" })},
		{"create empty app_code", "app_code", create(func(r *roomcellv1.CreateRoomRequest) { r.AppCode = "" })},
		{"create app_code with space", "app_code", create(func(r *roomcellv1.CreateRoomRequest) { r.AppCode = "my app" })},
		{"create room_id with colon", "room_id", create(func(r *roomcellv1.CreateRoomRequest) { r.RoomId = "r:1" })},
		{"create user_id with slash", "user_id", create(func(r *roomcellv1.CreateRoomRequest) { r.UserId = "u/1" })},
		{"create room_id too long", "room_id", create(func(r *roomcellv1.CreateRoomRequest) { r.RoomId = longID })},
		{"create command_id non-ascii", "command_id", create(func(r *roomcellv1.CreateRoomRequest) { r.CommandId = "命令" })},
		{"create request_id with space", "request_id", create(func(r *roomcellv1.CreateRoomRequest) { r.RequestId = "a b" })},
		// Command ids the room's workers derive for their own commands.
		{"join command_id of a switched_room leave", "command_id", join(func(r *roomcellv1.JoinRoomRequest) { r.CommandId = room.DirectoryIDPrefix + "join-1-ab" })},
		{"gift command_id of a rank change", "command_id", gift(func(r *roomcellv1.SendGiftRequest) { r.CommandId = room.RankIDPrefix + "3-1-2" })},
		{"kick command_id of a heartbeat timeout", "command_id", kick(func(r *roomcellv1.KickUserRequest) { r.CommandId = room.HeartbeatTimeoutIDPrefix + "00ff" })},
		{"create empty name", "name", create(func(r *roomcellv1.CreateRoomRequest) { r.Name = "" })},
		{"create name too long", "name", create(func(r *roomcellv1.CreateRoomRequest) { r.Name = longName })},
		{"create mic_seats 21", "mic_seats", create(func(r *roomcellv1.CreateRoomRequest) { r.MicSeats = 21 })},
		{"create mic_seats negative", "mic_seats", create(func(r *roomcellv1.CreateRoomRequest) { r.MicSeats = -1 })},
		{"create 21 admins", "admin_user_ids", create(func(r *roomcellv1.CreateRoomRequest) {
			r.AdminUserIds = nil
			for i := range room.MaxAdmins + 1 {
				r.AdminUserIds = append(r.AdminUserIds, "a"+string(rune('a'+i)))
			}
		})},
		{"create admin with space", "admin_user_ids[1]", create(func(r *roomcellv1.CreateRoomRequest) { r.AdminUserIds = []string{"ok", "not ok"} })},
		{"join empty user_id", "user_id", join(func(r *roomcellv1.JoinRoomRequest) { r.UserId = "" })},
		{"join room_id with slash", "room_id", join(func(r *roomcellv1.JoinRoomRequest) { r.RoomId = "a/b" })},
		{"join command_id too long", "command_id", join(func(r *roomcellv1.JoinRoomRequest) { r.CommandId = longID })},
		{"join user_id with tab", "user_id", join(func(r *roomcellv1.JoinRoomRequest) { r.UserId = "u\t1" })},
		{"leave reason too long", "reason", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.LeaveRoom(ctx, &roomcellv1.LeaveRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Reason: longReason})
			return err
		}},
		{"leave empty command_id", "command_id", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.LeaveRoom(ctx, &roomcellv1.LeaveRoomRequest{AppCode: "a", RoomId: "r", UserId: "u"})
			return err
		}},
		{"take mic seat -1", "seat", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.TakeMic(ctx, &roomcellv1.TakeMicRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Seat: -1})
			return err
		}},
		{"take mic seat 20", "seat", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.TakeMic(ctx, &roomcellv1.TakeMicRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Seat: room.MaxMicSeats})
			return err
		}},
		{"release mic empty app_code", "app_code", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.ReleaseMic(ctx, &roomcellv1.ReleaseMicRequest{CommandId: "c", RoomId: "r", UserId: "u"})
			return err
		}},
		{"gift count 0", "gift_count", gift(func(r *roomcellv1.SendGiftRequest) { r.GiftCount = 0 })},
		{"gift count negative", "gift_count", gift(func(r *roomcellv1.SendGiftRequest) { r.GiftCount = -5 })},
		{"gift count too large", "gift_count", gift(func(r *roomcellv1.SendGiftRequest) { r.GiftCount = room.MaxGiftCount + 1 })},
		{"gift empty to_user_id", "to_user_id", gift(func(r *roomcellv1.SendGiftRequest) { r.ToUserId = "" })},
		{"gift gift_id with colon", "gift_id", gift(func(r *roomcellv1.SendGiftRequest) { r.GiftId = "rose:1" })},
		{"kick empty target", "target_user_id", kick(func(r *roomcellv1.KickUserRequest) { r.TargetUserId = "" })},
		{"kick self", "target_user_id", kick(func(r *roomcellv1.KickUserRequest) { r.TargetUserId = r.UserId })},
		{"kick negative ban", "ban_seconds", kick(func(r *roomcellv1.KickUserRequest) { r.BanSeconds = -1 })},
		{"kick ban too long", "ban_seconds", kick(func(r *roomcellv1.KickUserRequest) { r.BanSeconds = room.MaxBanSeconds + 1 })},
		{"kick reason too long", "reason", kick(func(r *roomcellv1.KickUserRequest) { r.Reason = longReason })},
		{"close reason too long", "reason", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.CloseRoom(ctx, &roomcellv1.CloseRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Reason: longReason})
			return err
		}},
		{"close empty user_id", "user_id", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.CloseRoom(ctx, &roomcellv1.CloseRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r"})
			return err
		}},
		{"heartbeat command_id with space", "command_id", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.Heartbeat(ctx, &roomcellv1.HeartbeatRequest{CommandId: "c 1", AppCode: "a", RoomId: "r", UserId: "u"})
			return err
		}},
		{"heartbeat empty room_id", "room_id", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.Heartbeat(ctx, &roomcellv1.HeartbeatRequest{AppCode: "a", UserId: "u"})
			return err
		}},
		// Free text and reserved values.
		{"create name with NUL", "name", create(func(r *roomcellv1.CreateRoomRequest) { r.Name = "a\x00b" })},
		{"create blank name", "name", create(func(r *roomcellv1.CreateRoomRequest) { r.Name = " \u3000 " })},
		{"kick reason with ESC", "reason", kick(func(r *roomcellv1.KickUserRequest) { r.Reason = "\x1b[31m" })},
		{"leave reason heartbeat_timeout", "reason", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.LeaveRoom(ctx, &roomcellv1.LeaveRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Reason: room.ReasonHeartbeatTimeout})
			return err
		}},
		{"leave reason switched_room", "reason", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.LeaveRoom(ctx, &roomcellv1.LeaveRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Reason: room.ReasonSwitchedRoom})
			return err
		}},
		{"leave reason displaced", "reason", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.LeaveRoom(ctx, &roomcellv1.LeaveRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Reason: room.ReasonDisplaced})
			return err
		}},
		{"leave reason swapped", "reason", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.LeaveRoom(ctx, &roomcellv1.LeaveRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Reason: room.ReasonSwapped})
			return err
		}},
		{"move seat unknown policy", "policy", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.MoveSeat(ctx, &roomcellv1.MoveSeatRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Seat: 1, Policy: "shove"})
			return err
		}},
		{"close reason with a newline", "reason", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.CloseRoom(ctx, &roomcellv1.CloseRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Reason: "a\nb"})
			return err
		}},
		// The management commands.
		{"set admin empty target", "target_user_id", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.SetAdmin(ctx, &roomcellv1.SetAdminRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u"})
			return err
		}},
		{"remove admin empty command_id", "command_id", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.RemoveAdmin(ctx, &roomcellv1.RemoveAdminRequest{AppCode: "a", RoomId: "r", UserId: "u", TargetUserId: "v"})
			return err
		}},
		{"mute seat 20", "seat", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.MuteSeat(ctx, &roomcellv1.MuteSeatRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Seat: room.MaxMicSeats})
			return err
		}},
		{"unmute seat -1", "seat", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.UnmuteSeat(ctx, &roomcellv1.UnmuteSeatRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Seat: -1})
			return err
		}},
		{"lock seat empty room_id", "room_id", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.LockSeat(ctx, &roomcellv1.LockSeatRequest{CommandId: "c", AppCode: "a", UserId: "u"})
			return err
		}},
		{"unlock seat 99", "seat", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.UnlockSeat(ctx, &roomcellv1.UnlockSeatRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Seat: 99})
			return err
		}},
		{"update nothing", "name or announcement", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.UpdateRoom(ctx, &roomcellv1.UpdateRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u"})
			return err
		}},
		{"update blank name", "name", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.UpdateRoom(ctx, &roomcellv1.UpdateRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Name: "   "})
			return err
		}},
		{"update announcement with NUL", "announcement", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.UpdateRoom(ctx, &roomcellv1.UpdateRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Announcement: proto.String("\x00")})
			return err
		}},
		{"update announcement too long", "announcement", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.UpdateRoom(ctx, &roomcellv1.UpdateRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u",
				Announcement: proto.String(strings.Repeat("a", room.MaxAnnouncement+1))})
			return err
		}},
		{"get empty room_id", "room_id", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "a"})
			return err
		}},
		{"get app_code with colon", "app_code", func(ctx context.Context, c roomcellv1.RoomServiceClient) error {
			_, err := c.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "a:b", RoomId: "r"})
			return err
		}},
	}
}

func TestBadInputIsInvalidArgumentAndNeverReachesBackend(t *testing.T) {
	b := &fakeBackend{}
	client := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, b))
	for _, tc := range badInputCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(testCtx(t), client)
			assertCode(t, err, codes.InvalidArgument)
			if msg := status.Convert(err).Message(); !strings.Contains(msg, tc.field) {
				t.Fatalf("message %q does not name %s", msg, tc.field)
			}
		})
	}
	if n := len(b.calls()); n != 0 {
		t.Fatalf("backend called %d times for bad input", n)
	}
}

// Invalid UTF-8 cannot be sent by a generated client (it refuses to
// marshal it), but any other client can: these go over the wire raw.

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// withRawString marshals m and appends string field num holding v.
func withRawString(t *testing.T, m proto.Message, num protowire.Number, v string) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func TestInvalidUTF8OverTheWire(t *testing.T) {
	b := &fakeBackend{}
	conn := startServer(t, Options{}, b)
	create := validCreate()
	create.Name = ""
	noAdmins := validCreate()
	noAdmins.AdminUserIds = []string{"ok"}
	cases := []struct {
		name, method, field string
		body                []byte
	}{
		{"create name", "CreateRoom", "name", withRawString(t, create, 6, "bad\xff\xfe")},
		{"create second admin", "CreateRoom", "admin_user_ids[1]", withRawString(t, noAdmins, 8, "\xc3")},
		{"leave reason", "LeaveRoom", "reason", withRawString(t,
			&roomcellv1.LeaveRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u"}, 6, "\xff")},
		{"kick reason", "KickUser", "reason", withRawString(t,
			&roomcellv1.KickUserRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", TargetUserId: "v"}, 8, "\xe4\xb8")},
		{"join user_id", "JoinRoom", "user_id", withRawString(t,
			&roomcellv1.JoinRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r"}, 5, "\xff")},
		{"get room_id", "GetRoom", "room_id", withRawString(t,
			&roomcellv1.GetRoomRequest{AppCode: "a"}, 3, "\x80")},
		{"update name", "UpdateRoom", "name", withRawString(t,
			&roomcellv1.UpdateRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u"}, 6, "\xff")},
		{"update announcement (optional field)", "UpdateRoom", "announcement", withRawString(t,
			&roomcellv1.UpdateRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u"}, 7, "ok\xfe")},
		{"set admin target", "SetAdmin", "target_user_id", withRawString(t,
			&roomcellv1.SetAdminRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u"}, 6, "\xff")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out []byte
			err := conn.Invoke(testCtx(t), "/roomcell.v1.RoomService/"+tc.method, &tc.body, &out, grpc.ForceCodecV2(rawCodec{}))
			assertCode(t, err, codes.InvalidArgument)
			if msg := status.Convert(err).Message(); !strings.Contains(msg, tc.field) {
				t.Fatalf("message %q does not name %s", msg, tc.field)
			}
		})
	}
	if n := len(b.calls()); n != 0 {
		t.Fatalf("backend called %d times for invalid UTF-8", n)
	}
}

func TestInvalidUTF8DirectCall(t *testing.T) {
	b := &fakeBackend{}
	s := NewRoomServer(b, discardLogger(), 0)
	ctx := context.Background()
	r := validCreate()
	r.Name = "\xff"
	_, err := s.CreateRoom(ctx, r)
	assertCode(t, err, codes.InvalidArgument)
	_, err = s.CloseRoom(ctx, &roomcellv1.CloseRoomRequest{CommandId: "c", AppCode: "a", RoomId: "r", UserId: "u", Reason: "\xc0\xaf"})
	assertCode(t, err, codes.InvalidArgument)
	if n := len(b.calls()); n != 0 {
		t.Fatalf("backend called %d times", n)
	}
}

// A message whose handler does not promise a UTF-8 check keeps the
// runtime's refusal: the fallback is opt-in.
func TestUnregisteredMessageKeepsUTF8Refusal(t *testing.T) {
	c := serverCodec{base: encoding.GetCodecV2(grpcproto.Name)}
	body := withRawString(t, &roomcellv1.RoomView{}, 4, "\xff")
	err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(body)}, &roomcellv1.RoomView{})
	if err == nil || !isInvalidUTF8(err) {
		t.Fatalf("unregistered message decoded invalid UTF-8: err=%v", err)
	}
	var got roomcellv1.JoinRoomRequest
	body = withRawString(t, &roomcellv1.JoinRoomRequest{AppCode: "a"}, 5, "\xff")
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(body)}, &got); err != nil {
		t.Fatalf("registered message: %v", err)
	}
	if got.GetAppCode() != "a" || got.GetUserId() != "\xff" {
		t.Fatalf("decoded %q/%q, want a/\\xff", got.GetAppCode(), got.GetUserId())
	}
}
