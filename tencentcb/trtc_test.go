package tencentcb

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/room"
)

const (
	testKey = "cbKey123"
	testApp = int64(1400000001)
	t0      = int64(1_760_000_000_000)
	grace   = 10 * time.Second
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func trtcCfg() configs.TRTCCallbackConfig {
	c := configs.TRTCCallbackConfig{Enabled: true, Key: testKey, MaxBody: 64 << 10, AnswerTimeout: 2 * time.Second, Path: "/callbacks/trtc"}
	return c
}

func newTRTC(t testing.TB, rooms Rooms) *TRTC {
	t.Helper()
	h, err := NewTRTC(trtcCfg(), testApp, grace, rooms, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// callback is one TRTC callback as Tencent would send it.
type callback struct {
	typ    int
	roomID string // the audio room (GroupID)
	user   string
	unique int64
	atMs   int64
	reason int
}

func (c callback) body() []byte {
	b, _ := json.Marshal(map[string]any{
		"EventGroupId": map[bool]int{true: 1, false: 2}[c.typ < 200], "EventType": c.typ, "CallbackTs": c.atMs + 5,
		"EventInfo": map[string]any{"RoomId": c.roomID, "EventTs": c.atMs / 1000, "EventMsTs": c.atMs, "UserId": c.user,
			"UniqueId": c.unique, "Role": 20, "TerminalType": 3, "UserType": 3, "Reason": c.reason},
	})
	return b
}

// sign is the signature Tencent puts in the Sign header (computed here
// on its own, from TRTC's page, not with the endpoint's code).
func sign(key string, body []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func post(h http.Handler, body []byte, signature string) int {
	req := httptest.NewRequest(http.MethodPost, "/callbacks/trtc", bytes.NewReader(body))
	if signature != "" {
		req.Header.Set("Sign", signature)
	}
	req.Header.Set("SdkAppId", fmt.Sprint(testApp))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code
}

// seatedRoom makes app/r with alice seated (seat 1), bob a member.
func seatedRoom(t testing.TB, m *memRooms, roomID string) string {
	t.Helper()
	for _, c := range []room.Command{
		{Type: room.CmdCreateRoom, CommandID: "c-" + roomID, AppCode: "app", RoomID: roomID, UserID: "owner", Name: "r", NowMs: t0},
		{Type: room.CmdJoinRoom, CommandID: "j1-" + roomID, AppCode: "app", RoomID: roomID, UserID: "alice", NowMs: t0},
		{Type: room.CmdJoinRoom, CommandID: "j2-" + roomID, AppCode: "app", RoomID: roomID, UserID: "bob", NowMs: t0},
		{Type: room.CmdTakeMic, CommandID: "m1-" + roomID, AppCode: "app", RoomID: roomID, UserID: "alice", Seat: 1, NowMs: t0},
	} {
		if err := m.do(c); err != nil {
			t.Fatal(err)
		}
	}
	return roomim.GroupID("app", roomID)
}

func expire(t testing.TB, m *memRooms, roomID string, atMs int64) {
	t.Helper()
	s := m.state("app", roomID)
	if err := m.do(room.Command{Type: room.CmdExpireSeatRequests, CommandID: fmt.Sprintf("seat-expire-%d", s.Seq), AppCode: "app", RoomID: roomID, UserID: "room", NowMs: atMs}); err != nil {
		t.Fatal(err)
	}
}

// TestTRTCRefusesWhatIsNotSigned: unsigned, forged, re-signed for another
// body, another app's, not a POST, too big: refused with 401/405/413 and
// nothing reaches a room; signed but not a callback: 400, nothing either.
func TestTRTCRefusesWhatIsNotSigned(t *testing.T) {
	m := newMemRooms(t0)
	gid := seatedRoom(t, m, "r1")
	h := newTRTC(t, m)
	good := callback{typ: 104, roomID: gid, user: "alice", unique: 1, atMs: t0 + 1}.body()
	other := callback{typ: 104, roomID: gid, user: "bob", unique: 2, atMs: t0 + 1}.body()
	cases := []struct {
		name   string
		body   []byte
		sig    string
		method string
		appID  string
		want   int
	}{
		{name: "no Sign", body: good, want: 401},
		{name: "wrong key", body: good, sig: sign("otherKey", good), want: 401},
		{name: "signature of another body", body: good, sig: sign(testKey, other), want: 401},
		{name: "body changed after signing", body: append(bytes.Clone(good[:len(good)-1]), []byte(`,"x":1}`)...), sig: sign(testKey, good), want: 401},
		{name: "another app", body: good, sig: sign(testKey, good), appID: "1", want: 401},
		{name: "GET", body: good, sig: sign(testKey, good), method: http.MethodGet, want: 405},
		{name: "signed garbage", body: []byte("not json"), sig: sign(testKey, []byte("not json")), want: 400},
		{name: "signed, no event type", body: []byte(`{"EventInfo":{}}`), sig: sign(testKey, []byte(`{"EventInfo":{}}`)), want: 400},
		{name: "too big", body: bytes.Repeat([]byte("x"), 65<<10), sig: "abc", want: 413},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodPost, "/callbacks/trtc", bytes.NewReader(c.body))
		if c.method != "" {
			req.Method = c.method
		}
		if c.sig != "" {
			req.Header.Set("Sign", c.sig)
		}
		req.Header.Set("SdkAppId", fmt.Sprint(testApp))
		if c.appID != "" {
			req.Header.Set("SdkAppId", c.appID)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, w.Code, c.want)
		}
	}
	if n := m.calls.Load(); n != 0 {
		t.Fatalf("%d commands reached a room from refused callbacks", n)
	}
	if got := post(h, good, sign(testKey, good)); got != 200 {
		t.Fatalf("the genuine callback: %d", got)
	}
	if m.calls.Load() != 1 {
		t.Fatal("the genuine callback did not reach the room")
	}
}

// TestTRTCExitFreesTheSeatAfterTheGrace: a seated member's exit frees the
// seat at the end of the grace (reason audio_left); a re-enter within the
// grace keeps it; a retried callback is one command, on any node.
func TestTRTCExitFreesTheSeatAfterTheGrace(t *testing.T) {
	m := newMemRooms(t0)
	gid := seatedRoom(t, m, "r1")
	nodeA, nodeB := newTRTC(t, m), newTRTC(t, m)
	exit := callback{typ: 104, roomID: gid, user: "alice", unique: 7, atMs: t0 + 1000, reason: 2}.body()
	for i, n := range []*TRTC{nodeA, nodeA, nodeB} { // a retry on the same node, then on another
		if got := post(n, exit, sign(testKey, exit)); got != 200 {
			t.Fatalf("try %d: %d", i, got)
		}
	}
	var seen int
	for _, e := range m.events("app", "r1") {
		if _, ok := e.(room.RoomAudioSeen); ok {
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("%d RoomAudioSeen for one exit sent three times", seen)
	}
	expire(t, m, "r1", t0+1000+grace.Milliseconds()-1)
	if m.state("app", "r1").Seats[1] != "alice" {
		t.Fatal("seat freed before the grace's end")
	}
	expire(t, m, "r1", t0+1000+grace.Milliseconds())
	if m.state("app", "r1").Seats[1] != "" {
		t.Fatal("seat kept after the grace's end")
	}
	last := m.events("app", "r1")[len(m.events("app", "r1"))-1]
	if r, ok := last.(room.RoomMicReleased); !ok || r.Reason != room.ReasonAudioLeft || r.UserID != "alice" {
		t.Fatalf("last event %#v, want alice's seat released for audio_left", last)
	}

	// Re-entered within the grace: the seat stays.
	gid2 := seatedRoom(t, m, "r2")
	for _, c := range []callback{{typ: 104, roomID: gid2, user: "alice", unique: 8, atMs: t0 + 1000}, {typ: 103, roomID: gid2, user: "alice", unique: 9, atMs: t0 + 5000}} {
		if got := post(nodeB, c.body(), sign(testKey, c.body())); got != 200 {
			t.Fatal(got)
		}
	}
	expire(t, m, "r2", t0+60_000)
	if m.state("app", "r2").Seats[1] != "alice" {
		t.Fatal("a member back within the grace lost the seat")
	}
}

// TestTRTCUnavailableRoomIsRetriedByTencent: a room that does not answer
// gets 503 (Tencent retries); the retry lands once.
func TestTRTCUnavailableRoomIsRetriedByTencent(t *testing.T) {
	m := newMemRooms(t0)
	gid := seatedRoom(t, m, "r1")
	h := newTRTC(t, m)
	m.fail.Store(1)
	b := callback{typ: 203, roomID: gid, user: "bob", unique: 3, atMs: t0 + 1}.body()
	if got := post(h, b, sign(testKey, b)); got != http.StatusServiceUnavailable {
		t.Fatalf("room down: %d, want 503", got)
	}
	if got := post(h, b, sign(testKey, b)); got != 200 {
		t.Fatalf("retry: %d", got)
	}
	var removed []room.RoomAudioRemoved
	for _, e := range m.events("app", "r1") {
		if r, ok := e.(room.RoomAudioRemoved); ok {
			removed = append(removed, r)
		}
	}
	if len(removed) != 1 || removed[0].UserID != "bob" || removed[0].Reason != room.AudioRemovedNoSeat {
		t.Fatalf("removals %+v, want bob's for publishing without a seat", removed)
	}
}

// Events about rooms the endpoint cannot name, or of types it does not act
// on, are answered 200 (Tencent must not retry them) and change nothing.
func TestTRTCIgnoresWhatItDoesNotActOn(t *testing.T) {
	m := newMemRooms(t0)
	gid := seatedRoom(t, m, "r1")
	h := newTRTC(t, m)
	for _, c := range []callback{
		{typ: 201, roomID: gid, user: "alice", unique: 1, atMs: t0},            // video
		{typ: 104, roomID: "h-0123456789", user: "alice", unique: 2, atMs: t0}, // a hashed id
	} {
		if got := post(h, c.body(), sign(testKey, c.body())); got != 200 {
			t.Fatalf("%+v: %d", c, got)
		}
	}
	numeric := []byte(strings.Replace(string(callback{typ: 104, user: "alice", unique: 3, atMs: t0}.body()), `"RoomId":""`, `"RoomId":12345`, 1))
	if got := post(h, numeric, sign(testKey, numeric)); got != 200 {
		t.Fatalf("numeric room id: %d", got)
	}
	if n := m.calls.Load(); n != 0 {
		t.Fatalf("%d commands for events the endpoint does not act on", n)
	}
}
