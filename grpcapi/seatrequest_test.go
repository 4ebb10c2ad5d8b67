package grpcapi

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// seatRequestCases are the happy cases of the seat request RPCs.
func seatRequestCases(rid string) []rpcCase {
	return []rpcCase{
		{"SetSeatMode",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.SetSeatMode(ctx, &roomcellv1.SetSeatModeRequest{CommandId: "s1", AppCode: "app1", RoomId: "r1", UserId: "u1", SeatMode: "apply"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetSeatMode{SetSeatMode: &roomcellv1.SetSeatModeRequest{
				CommandId: "s1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", SeatMode: "apply"}}}},
		{"ApplySeat",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.ApplySeat(ctx, &roomcellv1.ApplySeatRequest{CommandId: "s2", AppCode: "app1", RoomId: "r1", UserId: "u2", Seat: 3, TimeoutSeconds: 30})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ApplySeat{ApplySeat: &roomcellv1.ApplySeatRequest{
				CommandId: "s2", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2", Seat: 3, TimeoutSeconds: 30}}}},
		{"CancelSeatApplication",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.CancelSeatApplication(ctx, &roomcellv1.CancelSeatApplicationRequest{CommandId: "s3", AppCode: "app1", RoomId: "r1", UserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_CancelSeatApplication{CancelSeatApplication: &roomcellv1.CancelSeatApplicationRequest{
				CommandId: "s3", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2"}}}},
		{"ApproveSeatApplication",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.ApproveSeatApplication(ctx, &roomcellv1.ApproveSeatApplicationRequest{CommandId: "s4", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ApproveSeatApplication{ApproveSeatApplication: &roomcellv1.ApproveSeatApplicationRequest{
				CommandId: "s4", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{"RejectSeatApplication",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.RejectSeatApplication(ctx, &roomcellv1.RejectSeatApplicationRequest{CommandId: "s5", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_RejectSeatApplication{RejectSeatApplication: &roomcellv1.RejectSeatApplicationRequest{
				CommandId: "s5", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{"InviteToSeat",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.InviteToSeat(ctx, &roomcellv1.InviteToSeatRequest{CommandId: "s6", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", Seat: 2})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_InviteToSeat{InviteToSeat: &roomcellv1.InviteToSeatRequest{
				CommandId: "s6", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", Seat: 2}}}},
		{"AcceptSeatInvitation",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.AcceptSeatInvitation(ctx, &roomcellv1.AcceptSeatInvitationRequest{CommandId: "s7", AppCode: "app1", RoomId: "r1", UserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_AcceptSeatInvitation{AcceptSeatInvitation: &roomcellv1.AcceptSeatInvitationRequest{
				CommandId: "s7", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2"}}}},
		{"DeclineSeatInvitation",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.DeclineSeatInvitation(ctx, &roomcellv1.DeclineSeatInvitationRequest{CommandId: "s8", AppCode: "app1", RoomId: "r1", UserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_DeclineSeatInvitation{DeclineSeatInvitation: &roomcellv1.DeclineSeatInvitationRequest{
				CommandId: "s8", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u2"}}}},
		{"KickOffSeat",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.KickOffSeat(ctx, &roomcellv1.KickOffSeatRequest{CommandId: "s9", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_KickOffSeat{KickOffSeat: &roomcellv1.KickOffSeatRequest{
				CommandId: "s9", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{"MoveSeat",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.MoveSeat(ctx, &roomcellv1.MoveSeatRequest{CommandId: "s10", AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 4, TargetUserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MoveSeat{MoveSeat: &roomcellv1.MoveSeatRequest{
				CommandId: "s10", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Seat: 4, TargetUserId: "u2"}}}},
		{"SetSeatCount",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.SetSeatCount(ctx, &roomcellv1.SetSeatCountRequest{CommandId: "s11", AppCode: "app1", RoomId: "r1", UserId: "u1", MicSeats: 12})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetSeatCount{SetSeatCount: &roomcellv1.SetSeatCountRequest{
				CommandId: "s11", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", MicSeats: 12}}}},
		{"BanUser",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.BanUser(ctx, &roomcellv1.BanUserRequest{CommandId: "b1", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", BanSeconds: 60, Reason: "spam"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_BanUser{BanUser: &roomcellv1.BanUserRequest{CommandId: "b1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", BanSeconds: 60, Reason: "spam"}}}},
		{"UnbanUser",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.UnbanUser(ctx, &roomcellv1.UnbanUserRequest{CommandId: "b2", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnbanUser{UnbanUser: &roomcellv1.UnbanUserRequest{CommandId: "b2", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{"MuteMember",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.MuteMember(ctx, &roomcellv1.MuteMemberRequest{CommandId: "b3", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", MuteSeconds: 30})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_MuteMember{MuteMember: &roomcellv1.MuteMemberRequest{CommandId: "b3", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", MuteSeconds: 30}}}},
		{"UnmuteMember",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.UnmuteMember(ctx, &roomcellv1.UnmuteMemberRequest{CommandId: "b4", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_UnmuteMember{UnmuteMember: &roomcellv1.UnmuteMemberRequest{CommandId: "b4", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2"}}}},
		{"ReopenRoom",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.ReopenRoom(ctx, &roomcellv1.ReopenRoomRequest{CommandId: "o1", AppCode: "app1", RoomId: "r1", UserId: "u1", Name: "again"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ReopenRoom{ReopenRoom: &roomcellv1.ReopenRoomRequest{CommandId: "o1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Name: "again"}}}},
		{"SetRoomMetadata",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.SetRoomMetadata(ctx, &roomcellv1.SetRoomMetadataRequest{CommandId: "m1", AppCode: "app1", RoomId: "r1", UserId: "u1", Category: "music", Tags: []string{"jazz"}, CoverUrl: "https://c/x.png", Visibility: "unlisted"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomMetadata{SetRoomMetadata: &roomcellv1.SetRoomMetadataRequest{CommandId: "m1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Category: "music", Tags: []string{"jazz"}, CoverUrl: "https://c/x.png", Visibility: "unlisted"}}}},
		{"SetRoomCustomInfo",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.SetRoomCustomInfo(ctx, &roomcellv1.SetRoomCustomInfoRequest{CommandId: "i1", AppCode: "app1", RoomId: "r1", UserId: "u1", Set: map[string]string{"theme": "dark"}, DeleteKeys: []string{"pin"}})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomCustomInfo{SetRoomCustomInfo: &roomcellv1.SetRoomCustomInfoRequest{CommandId: "i1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Set: map[string]string{"theme": "dark"}, DeleteKeys: []string{"pin"}}}}},
		{"SetRoomPassword",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.SetRoomPassword(ctx, &roomcellv1.SetRoomPasswordRequest{CommandId: "p1", AppCode: "app1", RoomId: "r1", UserId: "u1", Password: "pw"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetRoomPassword{SetRoomPassword: &roomcellv1.SetRoomPasswordRequest{CommandId: "p1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Password: "pw"}}}},
		{"SetChatDisabled",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.SetChatDisabled(ctx, &roomcellv1.SetChatDisabledRequest{CommandId: "d1", AppCode: "app1", RoomId: "r1", UserId: "u1", Disabled: true})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetChatDisabled{SetChatDisabled: &roomcellv1.SetChatDisabledRequest{CommandId: "d1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Disabled: true}}}},
		{"SetAllMicsMuted",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.SetAllMicsMuted(ctx, &roomcellv1.SetAllMicsMutedRequest{CommandId: "a1", AppCode: "app1", RoomId: "r1", UserId: "u1", Muted: true})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_SetAllMicsMuted{SetAllMicsMuted: &roomcellv1.SetAllMicsMutedRequest{CommandId: "a1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Muted: true}}}},
		{"LikeRoom",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.LikeRoom(ctx, &roomcellv1.LikeRoomRequest{CommandId: "l1", AppCode: "app1", RoomId: "r1", UserId: "u1", Count: 2})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_LikeRoom{LikeRoom: &roomcellv1.LikeRoomRequest{CommandId: "l1", RequestId: rid, AppCode: "app1", RoomId: "r1", UserId: "u1", Count: 2}}}},
		{"ListBans",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.ListBans(ctx, &roomcellv1.ListBansRequest{AppCode: "app1", RoomId: "r1", PageSize: 10})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ListBans{ListBans: &roomcellv1.ListBansRequest{RequestId: rid, AppCode: "app1", RoomId: "r1", PageSize: 10}}}},
		// A read: the room's view, one member page.
		{"ListSeatRequests",
			func(ctx context.Context, c roomcellv1.RoomServiceClient) (proto.Message, error) {
				return c.ListSeatRequests(ctx, &roomcellv1.ListSeatRequestsRequest{AppCode: "app1", RoomId: "r1"})
			},
			&roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_GetRoom{GetRoom: &roomcellv1.GetRoomRequest{
				RequestId: rid, AppCode: "app1", RoomId: "r1", PageSize: 1}}}},
	}
}

// ListGifts answers the catalog it was given, without asking a room; a
// node given none answers Unimplemented.
func TestListGifts(t *testing.T) {
	gifts := []*roomcellv1.Gift{{GiftId: "rose", Price: 10, Heat: 5}, {GiftId: "car", Price: 5000, Heat: 3000}}
	b := &fakeBackend{}
	rs := NewRoomServer(b, nil, 0)
	rs.SetGifts(gifts)
	got, err := rs.ListGifts(testCtx(t), &roomcellv1.ListGiftsRequest{})
	if err != nil || len(got.GetGifts()) != 2 || !proto.Equal(got.GetGifts()[1], gifts[1]) {
		t.Fatalf("ListGifts = %v, %v", got, err)
	}
	got.Gifts[0].Price = 1 // a caller's change does not reach the catalog
	if gifts[0].Price != 10 || len(b.calls()) != 0 {
		t.Fatalf("catalog changed (%v) or a room was asked (%d calls)", gifts[0], len(b.calls()))
	}
	if _, err := NewRoomServer(b, nil, 0).ListGifts(testCtx(t), &roomcellv1.ListGiftsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("no catalog: %v", err)
	}
	if _, err := rs.ListGifts(testCtx(t), &roomcellv1.ListGiftsRequest{RequestId: "bad id"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad request_id: %v", err)
	}
}
