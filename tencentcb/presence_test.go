package tencentcb

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/room"
)

const staleAfter = 60 * time.Second

// directoryOf answers the user → room lookup from the rooms' own members
// (the room directory in step with them) and counts the lookups.
type directoryOf struct {
	m       *memRooms
	mu      sync.Mutex
	lookups int
	fail    bool
}

func (d *directoryOf) userRoom(_ context.Context, app, user string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups++
	if d.fail {
		return "", errors.New("directory down")
	}
	for _, r := range []string{"r1", "r2"} {
		if d.m.state(app, r).IsMember(user) {
			return r, nil
		}
	}
	return "", nil
}

func stateChange(user, action string, atMs int64) map[string]any {
	reason := map[string]string{"Login": "Register", "Logout": "Unregister", "Disconnect": "LinkClose"}[action]
	return map[string]any{"CallbackCommand": IMStateChange, "EventTime": atMs,
		"Info": map[string]string{"Action": action, "To_Account": user, "Reason": reason}}
}

func isMember(m *memRooms, user string) bool { return m.state("app", "r1").IsMember(user) }

// timedOut counts user's heartbeat_timeout leaves in r1's log.
func timedOut(m *memRooms, user string) int {
	n := 0
	for _, e := range m.events("app", "r1") {
		if e == (room.RoomUserLeft{UserID: user, Reason: room.ReasonHeartbeatTimeout}) {
			n++
		}
	}
	return n
}

// With IM the presence source, members who never heartbeat stay while IM
// says they are online; a Logout/Disconnect takes them out stale_after
// later (the room's deadline, heartbeat_timeout); a Login inside the
// window cancels; an older Logout delivered after a newer Login changes
// nothing; a callback posted five times over two nodes is one report; a
// forged one changes nothing.
func TestIMStateChangeIsThePresence(t *testing.T) {
	m := newMemRooms(t0)
	seatedRoom(t, m, "r1")
	for _, u := range []string{"carol", "dave", "erin"} {
		if err := m.do(room.Command{Type: room.CmdJoinRoom, CommandID: "j-" + u, AppCode: "app", RoomID: "r1", UserID: u, NowMs: t0}); err != nil {
			t.Fatal(err)
		}
	}
	dir := &directoryOf{m: m}
	now := time.UnixMilli(t0 + 1000)
	clock := func() time.Time { return now }
	node1, node2 := newIM(t, m, clock), newIM(t, m, clock)
	for _, h := range []*IM{node1, node2} {
		h.FollowPresence([]string{"app"}, staleAfter, dir.userRoom)
	}
	must := func(h *IM, user, action string, atMs int64) {
		t.Helper()
		if code, a := imPost(h, IMStateChange, "Android", now, imToken, stateChange(user, action, atMs)); code != 200 || a.ActionStatus != "OK" {
			t.Fatalf("%s %s: %d %+v", user, action, code, a)
		}
	}
	// alice: online, no heartbeat ever. bob: logs out. carol: logs out,
	// back within the window. dave: a Login, then an older Logout
	// delivered late. erin: disconnects; Tencent's callback comes five
	// times over both nodes.
	must(node1, "alice", "Login", t0+1000)
	must(node1, "bob", "Logout", t0+2000)
	must(node2, "carol", "Disconnect", t0+2000)
	must(node1, "carol", "Login", t0+30_000)
	must(node2, "dave", "Login", t0+3000)
	must(node1, "dave", "Logout", t0+2500)
	for i := range 5 {
		must([]*IM{node1, node2}[i%2], "erin", "Disconnect", t0+4000)
	}
	// Forged: a wrong token, a replayed RequestTime. Nothing reaches a room.
	calls := m.calls.Load()
	for _, at := range []time.Time{now, now.Add(-2 * time.Minute)} {
		token := imToken
		if at == now {
			token = "forged"
		}
		if code, _ := imPost(node1, IMStateChange, "Android", at, token, stateChange("alice", "Logout", t0+5000)); code != http.StatusUnauthorized {
			t.Fatalf("forged state change: %d, want 401", code)
		}
	}
	if m.calls.Load() != calls {
		t.Fatal("a forged state change reached the room")
	}
	seen := 0
	for _, e := range m.events("app", "r1") {
		if s, ok := e.(room.RoomAudioSeen); ok && s.UserID == "erin" {
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("erin's one disconnect, posted 5 times, made %d reports in the room", seen)
	}
	if mk := m.state("app", "r1").OnlineMarks()["dave"]; mk.Out || mk.LastMs != t0+3000 {
		t.Fatalf("dave's older Logout after his Login changed his mark: %+v", mk)
	}

	// Just before the window ends nobody leaves; at its end bob and erin do.
	expire(t, m, "r1", t0+2000+staleAfter.Milliseconds()-1)
	for _, u := range []string{"owner", "alice", "bob", "carol", "dave", "erin"} {
		if !isMember(m, u) {
			t.Fatalf("%s left before stale_after", u)
		}
	}
	expire(t, m, "r1", t0+4000+staleAfter.Milliseconds())
	for _, u := range []string{"bob", "erin"} {
		if isMember(m, u) || timedOut(m, u) != 1 {
			t.Fatalf("%s: member %v, %d heartbeat_timeout leaves, want gone once", u, isMember(m, u), timedOut(m, u))
		}
	}
	// Much later: whoever IM says is online stays without a heartbeat.
	expire(t, m, "r1", t0+10*staleAfter.Milliseconds())
	for _, u := range []string{"owner", "alice", "carol", "dave"} {
		if !isMember(m, u) || timedOut(m, u) != 0 {
			t.Fatalf("%s (online at IM) taken out", u)
		}
	}
	// A Logout of someone in no room asks no room.
	calls = m.calls.Load()
	must(node1, "stranger", "Logout", t0+6000)
	if m.calls.Load() != calls {
		t.Fatal("a stranger's logout reached a room")
	}
}

// A directory that cannot say where the user is answers 503 (nothing is
// lost by IM trying again) and changes nothing; a report without a user
// or time is malformed; without FollowPresence (presence.source
// heartbeat) a state change reaches no room.
func TestIMStateChangeFailsClosed(t *testing.T) {
	m := newMemRooms(t0)
	seatedRoom(t, m, "r1")
	now := time.UnixMilli(t0 + 1000)
	dir := &directoryOf{m: m, fail: true}
	h := newIM(t, m, func() time.Time { return now })
	h.FollowPresence([]string{"app"}, staleAfter, dir.userRoom)
	if code, _ := imPost(h, IMStateChange, "Android", now, imToken, stateChange("bob", "Logout", t0+1000)); code != http.StatusServiceUnavailable {
		t.Fatalf("directory down: %d, want 503", code)
	}
	dir.fail = false
	for _, body := range []map[string]any{stateChange("", "Logout", t0+1000), stateChange("bob", "Logout", 0)} {
		if code, _ := imPost(h, IMStateChange, "Android", now, imToken, body); code != http.StatusBadRequest {
			t.Fatalf("%v: %d, want 400", body, code)
		}
	}
	m.fail.Store(1)
	if code, _ := imPost(h, IMStateChange, "Android", now, imToken, stateChange("bob", "Logout", t0+1000)); code != http.StatusServiceUnavailable {
		t.Fatalf("owner down: %d, want 503", code)
	}
	if _, ok := m.state("app", "r1").OnlineMarks()["bob"]; ok {
		t.Fatal("a failed state change left a mark")
	}
	plain := newIM(t, m, func() time.Time { return now })
	calls := m.calls.Load()
	if code, _ := imPost(plain, IMStateChange, "Android", now, imToken, stateChange("bob", "Logout", t0+1000)); code != 200 {
		t.Fatalf("heartbeat source: %d", code)
	}
	if m.calls.Load() != calls || slices.ContainsFunc(m.events("app", "r1"), func(e room.Event) bool { _, ok := e.(room.RoomAudioSeen); return ok }) {
		t.Fatal("with heartbeats the source, a state change reached the room")
	}
}

// With TRTC the presence source, a member who exits the audio room and
// does not enter again within stale_after leaves; one who enters again
// stays; with another source the exit only frees the seat after the
// grace.
func TestTRTCExitIsThePresence(t *testing.T) {
	m := newMemRooms(t0)
	gid := seatedRoom(t, m, "r1")
	if err := m.do(room.Command{Type: room.CmdJoinRoom, CommandID: "j-carol", AppCode: "app", RoomID: "r1", UserID: "carol", NowMs: t0}); err != nil {
		t.Fatal(err)
	}
	h := newTRTC(t, m)
	h.FollowPresence(staleAfter)
	for _, c := range []callback{
		{typ: trtcExit, roomID: gid, user: "alice", unique: 1, atMs: t0 + 1000, reason: 2},
		{typ: trtcExit, roomID: gid, user: "alice", unique: 1, atMs: t0 + 1000, reason: 2}, // Tencent's retry
		{typ: trtcExit, roomID: gid, user: "carol", unique: 2, atMs: t0 + 1000, reason: 2},
		{typ: trtcEnter, roomID: gid, user: "carol", unique: 3, atMs: t0 + 20_000},
		{typ: trtcExit, roomID: gid, user: "bob", unique: 4, atMs: t0 + 1000, reason: 2},
		{typ: trtcEnter, roomID: gid, user: "bob", unique: 5, atMs: t0 + 500}, // older, delivered late
	} {
		b := c.body()
		if code := post(h, b, sign(testKey, b)); code != 200 {
			t.Fatalf("%+v: %d", c, code)
		}
	}
	expire(t, m, "r1", t0+1000+grace.Milliseconds())
	if s := m.state("app", "r1"); s.SeatOf("alice") >= 0 || !s.IsMember("alice") {
		t.Fatalf("after the grace alice seat %d member %v, want unseated member", s.SeatOf("alice"), s.IsMember("alice"))
	}
	expire(t, m, "r1", t0+1000+staleAfter.Milliseconds())
	for u, gone := range map[string]bool{"alice": true, "bob": true, "carol": false, "owner": false} {
		if isMember(m, u) == gone || timedOut(m, u) != map[bool]int{true: 1}[gone] {
			t.Fatalf("%s: member %v, %d leaves, want gone=%v", u, isMember(m, u), timedOut(m, u), gone)
		}
	}
}
