package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/grpcapi"
)

// banRooms answers ListBans with two bans, over two pages.
type banRooms struct{ asked []string }

func (b *banRooms) Execute(_ context.Context, rc *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	l := rc.GetListBans()
	b.asked = append(b.asked, l.GetAppCode()+"/"+l.GetRoomId()+"@"+l.GetPageToken())
	if l.GetPageToken() == "" {
		return &roomcellv1.CommandReply{Bans: []*roomcellv1.BanEntry{{UserId: "alice", BannedUntilMs: 4_000_000_000_000}}, NextPageToken: "p2"}, nil
	}
	return &roomcellv1.CommandReply{Bans: []*roomcellv1.BanEntry{{UserId: "erin", BannedUntilMs: 4_000_000_000_000}}}, nil
}

// imFix records what the server asks IM to reconcile and answers a plan.
type imFix struct{ got map[string]int64 }

func (f *imFix) ReconcileBans(_ context.Context, app, room string, bans map[string]int64) (roomim.BanPlan, error) {
	f.got = bans
	return roomim.BanPlan{Ban: []roomim.BanOrder{{UserID: "alice", Seconds: 60}}, Unban: []string{"carol"}}, nil
}

// roomctl im reconcile-bans sends the room, and the server hands IM every
// page of the room's bans; the output says what changed; the flags are
// required.
func TestRoomctlImReconcileBans(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rooms, im := &banRooms{}, &imFix{}
	srv := grpc.NewServer()
	roomcellv1.RegisterImAdminServer(srv, grpcapi.NewImAdminServer(rooms, im, nil))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	addr := lis.Addr().String()

	code, out, errOut := outboxCtl(t, addr, "im", "reconcile-bans", "--app", "demo", "--room", "r1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"room demo/r1: 2 bans in force; IM: 1 banned, 1 unbanned", "banned at IM:   alice", "unbanned at IM: carol"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if len(im.got) != 2 || im.got["alice"] == 0 || im.got["erin"] == 0 || strings.Join(rooms.asked, ",") != "demo/r1@,demo/r1@p2" {
		t.Fatalf("IM got %v after reading %v, want both pages' bans", im.got, rooms.asked)
	}
	code, out, _ = outboxCtl(t, addr, "--json", "im", "reconcile-bans", "--app", "demo", "--room", "r1")
	var r struct {
		Banned   int      `json:"banned"`
		Unbanned []string `json:"unbanned_users"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Banned != 1 || len(r.Unbanned) != 1 {
		t.Fatalf("--json: exit %d %q", code, out)
	}
	if code, _, errOut := outboxCtl(t, addr, "im", "reconcile-bans", "--app", "demo"); code != 2 || !strings.Contains(errOut, "--room") {
		t.Fatalf("without --room: exit %d %q", code, errOut)
	}
}
