package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// roomctl ticket asks for the user's ticket and shows the room, the rights
// and that it is unsigned (this server holds no key); --user is required.
func TestRoomctlTicket(t *testing.T) {
	addr, b := startRoomTestServer(t)
	code, out, errOut := runCtl(t, addr, "ticket", "--app", "app1", "--room", "r1", "--user", "u2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"trtc room app1_r1", "privileges 14", "send audio (seat 2)", "unsigned"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	want := &roomcellv1.GetJoinTicketRequest{AppCode: "app1", RoomId: "r1", UserId: "u2"}
	got := proto.Clone(b.last(t).GetGetJoinTicket()).(*roomcellv1.GetJoinTicketRequest)
	got.RequestId = ""
	if !proto.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	before := b.count()
	if code, _, errOut := runCtl(t, addr, "ticket", "--app", "app1", "--room", "r1"); code == 0 || !strings.Contains(errOut, "user") {
		t.Fatalf("without --user: exit %d, %s", code, errOut)
	}
	if b.count() != before {
		t.Fatal("a refused invocation reached the server")
	}
}
