package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/logtest"
)

// Every line a node writes carries each top-level key once: a package
// adds no key its logger already has (the process logger's node_id, a
// caller's component), so a log pipeline never has two values to pick
// from. A dev node at debug level starts, serves a room's commands
// (create, joins, a kick, a refused gift, a leave), some while IM fails and stops; its whole
// log is read.
func TestLogLinesHaveNoDuplicateKeys(t *testing.T) {
	logs := &logtest.Buffer{}
	cfg, err := loadConfig(flags{dev: true, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodeID = "keys"
	cfg.Log = configs.LogConfig{Level: "debug", Format: "json", RepeatInterval: time.Nanosecond}
	app, err := Start(t.Context(), cfg, newLogger(cfg.Log, logs).With("node_id", cfg.NodeID), true)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := v1.NewRoomServiceClient(conn)
	ctx := ctxT(t)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "keys", RoomId: "r1", UserId: "owner", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	// IM fails for a while: the room's publisher and the relay log their
	// failures and retries (worker, node_id, event_id ...).
	res, err := http.Post("http://"+app.HTTPAddr()+"/debug/fake-im/outage?for=1500ms", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, u := range []string{"u1", "u2"} {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "j-" + u, AppCode: "keys", RoomId: "r1", UserId: u}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "k1", AppCode: "keys", RoomId: "r1", UserId: "owner", TargetUserId: "u2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.SendGift(ctx, &v1.SendGiftRequest{CommandId: "g2", AppCode: "keys", RoomId: "r1", UserId: "u2", ToUserId: "owner", GiftId: "rose", GiftCount: 1}); err == nil {
		t.Fatal("a gift from a kicked user was taken")
	}
	if _, err := rc.LeaveRoom(ctx, &v1.LeaveRoomRequest{CommandId: "l1", AppCode: "keys", RoomId: "r1", UserId: "u1"}); err != nil {
		t.Fatal(err)
	}
	// The relay sends what IM refused once it is back.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), `"msg_seq":5`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	app.Shutdown()

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) < 10 {
		t.Fatalf("only %d lines logged:\n%s", len(lines), logs.String())
	}
	for _, l := range lines {
		keys, err := topLevelKeys(l)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		seen := map[string]bool{}
		for _, k := range keys {
			if seen[k] {
				t.Errorf("key %s twice in %s", k, l)
			}
			seen[k] = true
		}
		if !seen["node_id"] {
			t.Errorf("line without node_id: %s", l)
		}
	}
}

// topLevelKeys is the keys of a JSON object line, in order, repeats
// included (encoding/json would keep the last of two).
func topLevelKeys(line string) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(line)))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	_, err := dec.Token() // }
	if err == io.EOF {
		err = nil
	}
	return keys, err
}
