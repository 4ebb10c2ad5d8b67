package grpcapi

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/delivery/trtc"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// ticketServer serves a RoomServer with a ticket signer over b.
func ticketServer(t *testing.T, b RoomBackend, signer TicketSigner) roomcellv1.RoomServiceClient {
	t.Helper()
	rs := NewRoomServer(b, discardLogger(), 0)
	rs.SetTickets(signer)
	return roomcellv1.NewRoomServiceClient(serveRoomServer(t, Options{Logger: discardLogger()}, rs))
}

// A ticket's keys verify for its user and audio room with the bits the
// room's rights give; a refusal is FAILED_PRECONDITION with the rule's
// code and signs nothing; a bad request never reaches the room.
func TestGetJoinTicketSignsTheRoomsRights(t *testing.T) {
	const app, key = 1400000001, "sig-key-for-tests"
	now := time.Unix(1_800_000_000, 0)
	signer, err := trtc.NewTickets(trtc.TicketConfig{SDKAppID: app, SigKey: key, TTL: 5 * time.Minute, UserSigTTL: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBackend{reply: func(_ context.Context, rc *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		switch rc.GetGetJoinTicket().GetUserId() {
		case "speaker":
			return &roomcellv1.CommandReply{RoomSeq: 9, JoinRights: &roomcellv1.JoinRights{SendAudio: true, Seat: 3}}, nil
		case "listener":
			return &roomcellv1.CommandReply{RoomSeq: 9, JoinRights: &roomcellv1.JoinRights{Seat: -1}}, nil
		case "banned":
			return nil, room.ErrBanned
		}
		return nil, room.ErrNotMember
	}}
	c := ticketServer(t, b, signer)
	ctx := testCtx(t)
	for user, wantBits := range map[string]uint32{"speaker": 2 | 4 | 8, "listener": 2 | 8} {
		got, err := c.GetJoinTicket(ctx, &roomcellv1.GetJoinTicketRequest{AppCode: "app1", RoomId: "r1", UserId: user})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetTrtcRoomId() != "app1_r1" || got.GetPrivileges() != wantBits || got.GetSdkAppId() != app || got.GetRoomSeq() != 9 ||
			got.GetExpiresAtMs() != now.Add(5*time.Minute).UnixMilli() {
			t.Fatalf("%s: %v", user, got)
		}
		rec, err := trtc.VerifyPrivateMapKey(got.GetPrivateMapKey(), app, key, user, "app1_r1", now.Add(time.Minute))
		if err != nil || rec.Privileges != wantBits {
			t.Fatalf("%s: key %+v %v", user, rec, err)
		}
		if _, err := trtc.VerifyPrivateMapKey(got.GetPrivateMapKey(), app, key, user, "app1_r2", now); err == nil {
			t.Fatalf("%s: the key opens another room", user)
		}
		if err := tencentim.VerifyUserSig(got.GetUserSig(), app, key, user, now); err != nil {
			t.Fatalf("%s: UserSig %v", user, err)
		}
	}
	for user, code := range map[string]errclass.Code{"banned": errclass.CodeBanned, "stranger": errclass.CodeNotMember} {
		got, err := c.GetJoinTicket(ctx, &roomcellv1.GetJoinTicketRequest{AppCode: "app1", RoomId: "r1", UserId: user})
		st := status.Convert(err)
		if got != nil || st.Code() != codes.FailedPrecondition || codeOf(st) != code {
			t.Fatalf("%s: %v %v (code %v), want FAILED_PRECONDITION %v", user, got, err, codeOf(st), code)
		}
	}
	calls := len(b.calls())
	for _, bad := range []*roomcellv1.GetJoinTicketRequest{
		{AppCode: "app1", RoomId: "r1"},
		{AppCode: "app1", RoomId: "", UserId: "u"},
		{AppCode: "app 1", RoomId: "r1", UserId: "u"},
	} {
		if _, err := c.GetJoinTicket(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%v: %v", bad, err)
		}
	}
	if len(b.calls()) != calls {
		t.Fatal("an invalid ticket request reached the room")
	}
}
