package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// roomctl ranking sends ListContributors with the period and the page,
// and prints the ranking's head.
func TestRoomctlRanking(t *testing.T) {
	addr, b := startRoomTestServer(t)
	code, out, errOut := runCtl(t, addr, "ranking", "--app", "app1", "--room", "r1", "--period", "day", "--page-size", "5", "--page-token", "MTA6dTE")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := b.last(t)
	clearRequestID(got)
	want := &roomcellv1.RoomCommand{Command: &roomcellv1.RoomCommand_ListContributors{ListContributors: &roomcellv1.ListContributorsRequest{
		AppCode: "app1", RoomId: "r1", Period: "day", PageSize: 5, PageToken: "MTA6dTE"}}}
	if !proto.Equal(got, want) {
		t.Fatalf("server got %v, want %v", got, want)
	}
	if !strings.Contains(out, "day ranking at room seq 3") || !strings.Contains(out, "no gifts") {
		t.Fatalf("output:\n%s", out)
	}
	if code, _, errOut := runCtl(t, addr, "ranking", "--app", "app1", "--room", "r1", "--period", "week"); code == 0 || !strings.Contains(errOut, "period") {
		t.Fatalf("period week: exit %d, %s", code, errOut)
	}
}
