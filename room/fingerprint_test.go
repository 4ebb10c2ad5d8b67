package room

import (
	"testing"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// A retry of a command carries another trace (and may carry another
// request id); it must still be the same request, or a retried command
// would be refused as a reuse of its command_id. Any field that says what
// is asked must still change the hash.
func TestRequestHashIgnoresTraceparentOnly(t *testing.T) {
	join := func(user, traceparent, requestID string) *v1.RoomCommand {
		return &v1.RoomCommand{Traceparent: traceparent, Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
			CommandId: "c1", RequestId: requestID, AppCode: "app", RoomId: "r1", UserId: user}}}
	}
	hash := func(rc *v1.RoomCommand) string {
		t.Helper()
		h, err := RequestHash(rc)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := hash(join("u1", "", "req-1"))
	traced := join("u1", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "req-2")
	if got := hash(traced); got != base {
		t.Fatalf("traceparent changed the fingerprint: %s vs %s", got, base)
	}
	if traced.Traceparent == "" {
		t.Fatal("RequestHash cleared the caller's traceparent")
	}
	if hash(join("u2", "", "req-1")) == base {
		t.Fatal("another user hashed like the first")
	}
}
