package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

func startDirectoryTestServer(t *testing.T) string {
	t.Helper()
	dir := memdb.NewDirectory(memdb.DirectoryOptions{})
	ctx := context.Background()
	for i, heat := range []int64{50, 300, 120} {
		if _, err := dir.UpdateRoom(ctx, persistence.RoomEntry{AppCode: "app1", RoomID: fmt.Sprintf("r%d", i),
			Name: fmt.Sprintf("Room %d", i), OwnerUserID: "o", MemberCount: int64(i + 2), Heat: heat}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	key := persistence.RoomKey{AppCode: "app1", RoomID: "r1"}
	if _, err := dir.SetUserRoom(ctx, key, "bob", now-90_000); err != nil {
		t.Fatal(err)
	}
	if err := dir.Heartbeat(ctx, key, "bob", now-5_000); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: log})
	rs := grpcapi.NewRoomServer(&roomTestBackend{}, log, 0)
	rs.SetDirectory(dir)
	roomcellv1.RegisterRoomServiceServer(srv, rs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestRoomsTop(t *testing.T) {
	addr := startDirectoryTestServer(t)
	code, out, errOut := runCtl(t, addr, "rooms", "top", "--app", "app1", "--limit", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "RANK") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "1 r1 Room 1 o 3 300") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "2 r2 Room 2 o 4 120") ||
		!strings.HasPrefix(lines[3], "3 rooms ranked; next page: --page-token ") {
		t.Fatalf("output:\n%s", out)
	}
	// The token is opaque (a position in the walk's snapshot).
	token := strings.TrimPrefix(lines[3], "3 rooms ranked; next page: --page-token ")
	code, out, _ = runCtl(t, addr, "--json", "rooms", "top", "--app", "app1", "--page-token", token)
	var page struct {
		Rooms []struct {
			RoomID string `json:"room_id"`
			Rank   string `json:"rank"`
		} `json:"rooms"`
		NextPageToken string `json:"next_page_token"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Rooms) != 1 || page.Rooms[0].RoomID != "r0" || page.Rooms[0].Rank != "3" || page.NextPageToken != "" {
		t.Fatalf("second page (exit %d): %s", code, out)
	}
	code, _, errOut = runCtl(t, addr, "rooms", "top")
	if code != 2 || !strings.Contains(errOut, "roomctl rooms top: --app is required") {
		t.Fatalf("without --app: exit %d %s", code, errOut)
	}
}

func TestUserWhere(t *testing.T) {
	addr := startDirectoryTestServer(t)
	code, out, errOut := runCtl(t, addr, "user", "where", "--app", "app1", "--user", "bob")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Ages are rounded (seconds under a minute): a slow machine may add one.
	if !strings.HasPrefix(out, "user bob is in room app1/r1 (online)\n  joined 2m0s ago, last seen ") ||
		!(strings.HasSuffix(out, " 5s ago\n") || strings.HasSuffix(out, " 6s ago\n")) {
		t.Fatalf("output %q", out)
	}
	code, _, errOut = runCtl(t, addr, "user", "where", "--app", "app1", "--user", "nobody")
	if code != 1 || !strings.Contains(errOut, "NotFound: user nobody is in no room of app app1") {
		t.Fatalf("unknown user: exit %d %s", code, errOut)
	}
}
