package grpcapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/api/roomcellv1"
)

// slowWatchAfter makes the fake watch send slowWatchEvents events 200ms
// apart.
const slowWatchAfter, slowWatchEvents = 1000, 6

func startGateway(t *testing.T) (string, *fakeBackend) {
	t.Helper()
	return startGatewayWith(t, nil)
}

// startGatewayWith starts the gateway as the process does (the server's
// tokens checked at the door too), edit changing its options.
func startGatewayWith(t *testing.T, edit func(*GatewayOptions)) (string, *fakeBackend) {
	t.Helper()
	log := discardLogger()
	srv, _ := NewServer(Options{Logger: log, ClientTokens: []string{clientTok}, OperatorTokens: []string{operatorTok}})
	b := &fakeBackend{}
	rs := NewRoomServer(b, log, 0)
	rs.SetEvents(&fakeEvents{
		list: func(r *roomcellv1.ListRoomEventsRequest) (*roomcellv1.ListRoomEventsReply, error) {
			if r.AfterRoomSeq < 10 {
				return nil, &roomfeed.TrimmedError{After: r.AfterRoomSeq, OldestAfterSeq: 10, HeadSeq: 12}
			}
			return gatewayEventsReply(), nil
		},
		wire: marshalEvent,
		watch: func(ctx context.Context, after int64, send func(*roomcellv1.WatchRoomReply) error) error {
			if after == slowWatchAfter {
				// A stream that outlives the gateway's read and write
				// timeouts of TestGatewayStreamOutlivesTimeouts.
				for s := after + 1; s <= after+slowWatchEvents; s++ {
					time.Sleep(200 * time.Millisecond)
					if err := send(&roomcellv1.WatchRoomReply{RoomSeq: s}); err != nil {
						return err
					}
				}
				return &roomfeed.WatchEndedError{ResumeAfter: after + slowWatchEvents, Reason: roomfeed.EndMoved}
			}
			for s := after + 1; s <= after+2; s++ {
				if err := send(&roomcellv1.WatchRoomReply{RoomSeq: s, Events: watchEvents(after, s)}); err != nil {
					return err
				}
			}
			return &roomfeed.WatchEndedError{ResumeAfter: after + 2, Reason: roomfeed.EndMoved}
		},
	}, 10)
	RegisterRoomService(srv, rs)
	o := GatewayOptions{Addr: "127.0.0.1:0", Logger: log, ClientTokens: []string{clientTok}, OperatorTokens: []string{operatorTok}}
	if edit != nil {
		edit(&o)
	}
	g, err := StartGateway(srv, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Shutdown(context.Background()); srv.Stop() })
	return "http://" + g.Addr(), b
}

// gatewayEventsReply is the fake room's events after seq 10.
func gatewayEventsReply() *roomcellv1.ListRoomEventsReply {
	return &roomcellv1.ListRoomEventsReply{NextAfterSeq: 12, HeadSeq: 12, Events: []*roomcellv1.RoomLogEvent{
		{RoomSeq: 11, EventId: "a:r1:11:0", EventType: "RoomUserJoined", Payload: `{"user_id":"u2"}`, CommandId: "c11", CreatedAtMs: 1700000000000},
		{RoomSeq: 12, EventId: "a:r1:12:0", EventType: "RoomGiftSent", Payload: `{"gift_id":"rose","count":3}`, CommandId: "c12", CreatedAtMs: 1700000000001}}}
}

func httpDo(t *testing.T, method, url, token, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Request-Id", "req-gw-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// The seed's kick route reaches KickUser with the body's fields, under
// the same token rule and error vocabulary as gRPC.
func TestGatewayKickRouteAuthAndErrors(t *testing.T) {
	base, b := startGateway(t)
	body := `{"command_id":"k1","app_code":"app1","room_id":"r1","user_id":"u1","target_user_id":"u2","ban_seconds":60,"reason":"spam"}`
	if code, out, _ := httpDo(t, "POST", base+"/api/v1/rooms/user/kick", "", body); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", code, out)
	}
	if code, out, _ := httpDo(t, "POST", base+"/api/v1/rooms/user/kick", "not-a-token", body); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d %s", code, out)
	}
	code, out, hdr := httpDo(t, "POST", base+"/api/v1/rooms/user/kick", clientTok, body)
	if code != http.StatusOK {
		t.Fatalf("kick: %d %s", code, out)
	}
	var reply map[string]any
	if err := json.Unmarshal([]byte(out), &reply); err != nil || reply["room_seq"] != "7" {
		t.Fatalf("kick reply %s (%v)", out, err)
	}
	if hdr.Get("X-Request-Id") != "req-gw-1" {
		t.Fatalf("request id header %q", hdr.Get("X-Request-Id"))
	}
	got := b.calls()[len(b.calls())-1].GetKickUser()
	want := &roomcellv1.KickUserRequest{CommandId: "k1", RequestId: "req-gw-1", AppCode: "app1", RoomId: "r1", UserId: "u1", TargetUserId: "u2", BanSeconds: 60, Reason: "spam"}
	if !proto.Equal(got, want) {
		t.Fatalf("backend got %v, want %v", got, want)
	}
	// Bad input: the gRPC check's text, as 400.
	code, out, _ = httpDo(t, "POST", base+"/api/v1/rooms/user/kick", clientTok, `{"command_id":"k2","app_code":"app1","room_id":"r1","user_id":"u1"}`)
	if code != http.StatusBadRequest || !strings.Contains(out, "target_user_id") {
		t.Fatalf("bad kick: %d %s", code, out)
	}
	if code, out, _ = httpDo(t, "POST", base+"/api/v1/rooms/user/kick", clientTok, `{"command_id":`); code != http.StatusBadRequest {
		t.Fatalf("broken JSON: %d %s", code, out)
	}
}

func TestGatewayEventsAndWatch(t *testing.T) {
	base, _ := startGateway(t)
	code, out, _ := httpDo(t, "GET", base+"/api/v1/rooms/events?app_code=app1&room_id=r1&after_room_seq=10", clientTok, "")
	if code != http.StatusOK || !strings.Contains(out, `"event_id":"a:r1:11:0"`) || !strings.Contains(out, `"head_seq":"12"`) {
		t.Fatalf("events: %d %s", code, out)
	}
	code, out, _ = httpDo(t, "GET", base+"/api/v1/rooms/events?app_code=app1&room_id=r1&after_room_seq=3", clientTok, "")
	if code != http.StatusBadRequest || !strings.Contains(out, "ROOM_EVENTS_TRIMMED") || !strings.Contains(out, `"head_seq":"12"`) {
		t.Fatalf("trimmed: %d %s", code, out)
	}
	// A stream: one JSON object a line, the end as an error with the
	// resume seq.
	code, out, _ = httpDo(t, "GET", base+"/api/v1/rooms/watch?app_code=app1&room_id=r1&after_room_seq=4", clientTok, "")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != http.StatusOK || len(lines) != 3 || !strings.Contains(lines[0], `"room_seq":"5"`) ||
		!strings.Contains(lines[2], "ROOM_WATCH_ENDED") || !strings.Contains(lines[2], `"resume_after_seq":"6"`) {
		t.Fatalf("watch: %d\n%s", code, out)
	}
	if code, out, _ := httpDo(t, "GET", base+"/api/v1/rooms/watch?app_code=app1&room_id=r1", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("watch without token: %d %s", code, out)
	}
}
