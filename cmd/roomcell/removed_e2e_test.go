package main

import (
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// Over gRPC, a kicked user's next command is FailedPrecondition with the
// not-member text, then when, by whom and why the user was removed, and
// the NOT_MEMBER code in its ErrorInfo.
func TestRemovedUserIsToldWhyOverGRPC(t *testing.T) {
	_, rc := startDev(t, nil)
	ctx := ctxT(t)
	const a, r = "demo", "room-removed"
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: a, RoomId: r, UserId: "alice", Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: a, RoomId: r, UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "c3", AppCode: a, RoomId: r, UserId: "alice", TargetUserId: "bob", Reason: "flooding"}); err != nil {
		t.Fatal(err)
	}
	_, err := rc.Heartbeat(ctx, &v1.HeartbeatRequest{AppCode: a, RoomId: r, UserId: "bob"})
	st, _ := status.FromError(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("heartbeat of a kicked user: %v", err)
	}
	for _, want := range []string{"user is not a member of the room", "bob was removed at ", "kicked by alice (flooding)", "JoinRoom to come back"} {
		if !strings.Contains(st.Message(), want) {
			t.Errorf("message %q lacks %q", st.Message(), want)
		}
	}
	if !strings.Contains(errorInfoReason(st), "NOT_MEMBER") {
		t.Errorf("ErrorInfo reason %q, want the NOT_MEMBER code", errorInfoReason(st))
	}
}

// errorInfoReason is the reason of the roomcell ErrorInfo detail of st.
func errorInfoReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "roomcell" {
			return info.GetReason()
		}
	}
	return ""
}
