//go:build !race

package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster/clustertest"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/room"
)

// TestMultiMemberAudioDropWhileOwnerKilled: on three roomcell processes
// with the TRTC callback endpoint, a seated member's audio drops (a 104,
// reason timeout) and the room's owner is SIGKILLed at once; Tencent's
// callbacks (every one sent to every live node, retried until taken) reach
// the new owner: the seat is freed once, within seat_grace + 1 s of the
// exit plus the failover time; another member who drops and enters again
// within the grace (the enter delivered before the grace ends: one that
// arrives after the room committed the release cannot undo it) keeps the
// seat.
func TestMultiMemberAudioDropWhileOwnerKilled(t *testing.T) {
	const key, grace = "killTestKey1", 5 * time.Second
	c := clustertest.New(t, clustertest.Options{Nodes: 3, BinDir: clusterBinDir(), Edit: func(_ int, nc *clustertest.NodeConfig) {
		nc.Presence = map[string]any{"stale_after": "10m"}
		if nc.Extra == nil {
			nc.Extra = map[string]any{}
		}
		nc.Extra["trtc"] = map[string]any{"seat_grace": grace.String(), "callback": map[string]any{"enabled": true, "key": key}}
	}})
	sc := newSeatClients(t, c)
	const r = "audio-kill"
	gid := roomim.GroupID(clustertest.App, r)
	sc.mustDo("create", func(ctx context.Context, rc v1.RoomServiceClient) (*v1.CommandReply, error) {
		return rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "create", AppCode: clustertest.App, RoomId: r, UserId: "owner", Name: r})
	})
	for i, u := range []string{"alice", "bob"} {
		sc.mustDo("join-"+u, func(ctx context.Context, rc v1.RoomServiceClient) (*v1.CommandReply, error) {
			return rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "join-" + u, AppCode: clustertest.App, RoomId: r, UserId: u})
		})
		sc.mustDo("mic-"+u, func(ctx context.Context, rc v1.RoomServiceClient) (*v1.CommandReply, error) {
			return rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: "mic-" + u, AppCode: clustertest.App, RoomId: r, UserId: u, Seat: int32(i + 1)})
		})
	}
	body := func(typ int, user string, atMs int64) []byte {
		b, _ := json.Marshal(map[string]any{"EventGroupId": 1, "EventType": typ, "CallbackTs": atMs,
			"EventInfo": map[string]any{"RoomId": gid, "EventTs": atMs / 1000, "EventMsTs": atMs, "UserId": user, "UniqueId": atMs*10 + int64(typ), "Reason": 2}})
		return b
	}
	// deliver posts b to every live node until one takes it, as Tencent's
	// retries would reach whichever node its load balancer picks.
	deliver := func(b []byte) time.Time {
		m := hmac.New(sha256.New, []byte(key))
		m.Write(b)
		sign := base64.StdEncoding.EncodeToString(m.Sum(nil))
		end := time.Now().Add(60 * time.Second)
		for time.Now().Before(end) {
			took := false
			for _, n := range c.Nodes {
				if !n.Running() {
					continue
				}
				req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr+"/callbacks/trtc", bytes.NewReader(b))
				req.Header.Set("Sign", sign)
				resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
				if err == nil {
					resp.Body.Close()
					took = took || resp.StatusCode == 200
				}
			}
			if took {
				return time.Now()
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("callback never taken: %s", b)
		return time.Time{}
	}
	owner := ownerNode(t, c, r)
	exitAt := time.Now()
	owner.Kill()
	killed := time.Now()
	taken := deliver(body(104, "alice", exitAt.UnixMilli()))
	deliver(body(104, "bob", exitAt.UnixMilli()))
	deliver(body(103, "bob", exitAt.UnixMilli()+500))
	failover := taken.Sub(killed)
	live := c.Nodes[0]
	if live == owner {
		live = c.Nodes[1]
	}
	rc := live.Rooms(t)
	var freed time.Duration
	for end := time.Now().Add(grace + time.Second + failover + 10*time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		g, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: clustertest.App, RoomId: r})
		cancel()
		if err == nil && g.Room.Seats[1].UserId == "" {
			freed = time.Since(exitAt)
			break
		}
	}
	if freed == 0 {
		t.Fatal("alice's seat never freed")
	}
	t.Logf("seat freed %s after the exit; failover (kill to the first callback taken) %s", freed.Round(time.Millisecond), failover.Round(time.Millisecond))
	if freed > grace+time.Second+failover {
		t.Fatalf("seat freed %s after the exit, want within seat_grace %s + 1s + failover %s", freed, grace, failover)
	}
	time.Sleep(2 * grace)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: clustertest.App, RoomId: r})
	if err != nil {
		t.Fatal(err)
	}
	if g.Room.Seats[2].UserId != "bob" {
		t.Fatalf("bob entered again within the grace and lost the seat: %v", g.Room.Seats)
	}
	log, err := rc.ListRoomEvents(ctx, &v1.ListRoomEventsRequest{AppCode: clustertest.App, RoomId: r, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	releases := 0
	for _, e := range log.Events {
		if e.EventType == room.TypeRoomMicReleased && strings.Contains(e.Payload, room.ReasonAudioLeft) {
			releases++
		}
	}
	if releases != 1 {
		t.Fatalf("%d audio_left releases, want one", releases)
	}
}
