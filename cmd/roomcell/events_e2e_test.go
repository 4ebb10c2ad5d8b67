package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
)

// A dev process end to end: ListRoomEvents and WatchRoom over gRPC, the
// same log over the HTTP/JSON gateway, and a drain that ends the watch
// with its resume seq before gRPC stops.
func TestEndToEndRoomEventsWatchAndGateway(t *testing.T) {
	app, c := startDev(t, func(cfg *configs.Config) { cfg.Gateway.Addr = "127.0.0.1:0" })
	ctx := ctxT(t)
	if _, err := c.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c0", AppCode: "app", RoomId: "r1", UserId: "owner", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: fmt.Sprint("j", i), AppCode: "app", RoomId: "r1", UserId: fmt.Sprint("u", i)}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := c.ListRoomEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1"})
	if err != nil || list.HeadSeq != 6 || list.NextAfterSeq != 6 || len(list.Events) != 7 {
		t.Fatalf("list: %v %v", list, err)
	}
	resp, err := http.Get("http://" + app.gateway.Addr() + "/api/v1/rooms/events?app_code=app&room_id=r1&after_room_seq=4")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Count(string(body), `"event_type":"RoomUserJoined"`) != 2 {
		t.Fatalf("gateway events: %d %s", resp.StatusCode, body)
	}
	// A watch of the idle room gets its header (the request id) as soon
	// as the owner took it, with no event to send.
	idleCtx, idleCancel := context.WithTimeout(ctx, 5*time.Second)
	idle, err := c.WatchRoom(idleCtx, &v1.WatchRoomRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: 6})
	if err != nil {
		t.Fatal(err)
	}
	if md, err := idle.Header(); err != nil || len(md.Get(grpcapi.RequestIDHeader)) != 1 {
		t.Fatalf("idle watch: header %v, %v (%v)", md, err, idleCtx.Err())
	}
	idleCancel()
	s, err := c.WatchRoom(ctx, &v1.WatchRoomRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: 3})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for len(seqs) < 3 {
		m, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, m.RoomSeq)
	}
	if fmt.Sprint(seqs) != "[4 5 6]" {
		t.Fatalf("watch caught up with %v", seqs)
	}
	if _, err := c.LeaveRoom(ctx, &v1.LeaveRoomRequest{CommandId: "l0", AppCode: "app", RoomId: "r1", UserId: "u0"}); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Recv(); err != nil || m.RoomSeq != 7 || m.Events[0].EventType != "RoomUserLeft" {
		t.Fatalf("live event: %v %v", m, err)
	}
	done := make(chan struct{})
	go func() { app.Shutdown(); close(done) }()
	_, err = s.Recv()
	wantCode(t, err, codes.Unavailable, "watch on drain")
	if after, ok := grpcapi.ResumeAfterSeq(err); !ok || after != 7 {
		t.Fatalf("drain: resume %d %v (%v)", after, ok, err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown hung")
	}
}
