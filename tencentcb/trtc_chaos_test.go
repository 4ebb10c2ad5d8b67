package tencentcb

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/room"
)

// chaosRooms sets up rooms r0..r4: owner; u0..u3 seated on seats 0..3;
// u4..u7 members without a seat; seat 3 muted; "bad" kicked with a ban.
func chaosRooms(t *testing.T, m *memRooms) []string {
	t.Helper()
	var gids []string
	for r := range 5 {
		rid := fmt.Sprintf("r%d", r)
		cmds := []room.Command{{Type: room.CmdCreateRoom, UserID: "owner", Name: "chaos"}}
		for i := range 8 {
			cmds = append(cmds, room.Command{Type: room.CmdJoinRoom, UserID: fmt.Sprintf("u%d", i)})
		}
		cmds = append(cmds, room.Command{Type: room.CmdJoinRoom, UserID: "bad"},
			room.Command{Type: room.CmdKickUser, UserID: "owner", TargetUserID: "bad", BanSeconds: 86400})
		for i := range 4 {
			cmds = append(cmds, room.Command{Type: room.CmdTakeMic, UserID: fmt.Sprintf("u%d", i), Seat: i})
		}
		cmds = append(cmds, room.Command{Type: room.CmdMuteSeat, UserID: "owner", Seat: 3})
		for i, c := range cmds {
			c.CommandID, c.AppCode, c.RoomID, c.NowMs = fmt.Sprintf("setup-%d", i), "app", rid, t0
			if err := m.do(c); err != nil {
				t.Fatalf("setup %s: %v", c.Type, err)
			}
		}
		gids = append(gids, roomGID(rid))
	}
	return gids
}

func roomGID(rid string) string { return "app_" + rid }

// honestStream is 1,000 distinct callbacks over the five rooms, in event
// time order: seated members dropping out and coming back, members and
// strangers publishing, strangers and the banned entering.
func honestStream(r *rand.Rand, gids []string) []callback {
	users := []string{"u0", "u1", "u2", "u3", "u0", "u1", "u4", "u5", "u6", "u7", "x0", "x1", "bad"}
	var out []callback
	at := t0 + 1000
	for i := range 1000 {
		at += int64(20 + r.IntN(80))
		c := callback{roomID: gids[r.IntN(len(gids))], user: users[r.IntN(len(users))], unique: int64(i + 1), atMs: at}
		switch k := r.IntN(10); {
		case k < 4:
			c.typ, c.reason = 104, 1+r.IntN(3)
		case k < 8:
			c.typ = 103
		default:
			c.typ = 203
		}
		out = append(out, c)
	}
	return out
}

// effects are what the room did that reaches outside, per room: seats
// released for a lost audio and users removed from the audio room, as a
// sorted list; the bookkeeping RoomAudioSeen of reports that a newer one
// made stale is not among them (a reordered stream drops those, by
// design).
func effects(m *memRooms, rid string) []string {
	var out []string
	for _, e := range m.events("app", rid) {
		switch e := e.(type) {
		case room.RoomMicReleased:
			if e.Reason == room.ReasonAudioLeft {
				out = append(out, fmt.Sprintf("released %s seat %d", e.UserID, e.Seat))
			}
		case room.RoomAudioRemoved:
			out = append(out, fmt.Sprintf("removed %s %s on %s", e.UserID, e.Reason, e.Kind))
		}
	}
	sort.Strings(out)
	return out
}

// TestTRTCDisorderedCallbacksEqualTheHonestStream sends 1,000 callbacks
// the way Tencent and an attacker would: 30% duplicated, 20% swapped with
// a neighbour, 10% arriving 30 to 60 s (of event time) late, 5% forged
// (a body changed under its old signature), 5% replays of old ones sent
// again at the end, spread over three nodes that post concurrently. Every
// room ends as the honest in-order stream leaves it (seats, members,
// audio marks, and the effects: seats released, users removed); forged
// ones answer 401 and change nothing.
func TestTRTCDisorderedCallbacksEqualTheHonestStream(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	honest := newMemRooms(t0)
	gids := chaosRooms(t, honest)
	stream := honestStream(r, gids)
	end := stream[len(stream)-1].atMs + grace.Milliseconds()
	h := newTRTC(t, honest)
	for _, c := range stream {
		if got := post(h, c.body(), sign(testKey, c.body())); got != 200 {
			t.Fatalf("honest %+v: %d", c, got)
		}
	}

	type arrival struct {
		body   []byte
		sig    string
		forged bool
	}
	var arrivals []arrival
	for _, c := range stream {
		arrivals = append(arrivals, arrival{body: c.body(), sig: sign(testKey, c.body())})
	}
	n := len(arrivals)
	for i := range n {
		switch k := r.IntN(100); {
		case k < 10: // late: behind the callbacks of the next 30 to 60 s
			j := min(len(arrivals)-1, i+300+r.IntN(300))
			a := arrivals[i]
			arrivals = append(arrivals[:i], arrivals[i+1:]...)
			arrivals = append(arrivals[:j], append([]arrival{a}, arrivals[j:]...)...)
		case k < 30 && i+1 < len(arrivals): // reordered with its neighbour
			arrivals[i], arrivals[i+1] = arrivals[i+1], arrivals[i]
		}
	}
	var extra []arrival
	forged := 0
	for _, a := range arrivals {
		if r.IntN(100) < 30 {
			extra = append(extra, a) // a duplicate, placed at random below
		}
		if r.IntN(100) < 5 {
			body := bytes.Replace(a.body, []byte(`"UserId":"`), []byte(`"UserId":"x`), 1)
			extra = append(extra, arrival{body: body, sig: a.sig, forged: true})
			forged++
		}
	}
	for _, a := range extra {
		j := r.IntN(len(arrivals) + 1)
		arrivals = append(arrivals[:j], append([]arrival{a}, arrivals[j:]...)...)
	}
	for range n / 20 { // replays of old ones, after everything
		arrivals = append(arrivals, arrivals[r.IntN(n/2)])
	}

	forged = 0
	for _, a := range arrivals {
		if a.forged {
			forged++
		}
	}
	noisy := newMemRooms(t0)
	chaosRooms(t, noisy)
	nodes := []*TRTC{newTRTC(t, noisy), newTRTC(t, noisy), newTRTC(t, noisy)}
	work := make(chan arrival)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wrong []string
	refused := 0
	for _, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				got := post(node, a.body, a.sig)
				mu.Lock()
				switch {
				case a.forged && got == http.StatusUnauthorized:
					refused++
				case a.forged || got != http.StatusOK:
					wrong = append(wrong, fmt.Sprintf("forged=%v answered %d: %s", a.forged, got, a.body))
				}
				mu.Unlock()
			}
		}()
	}
	for _, a := range arrivals {
		work <- a
	}
	close(work)
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("%d wrong answers, e.g. %s", len(wrong), wrong[0])
	}
	if refused != forged || forged == 0 {
		t.Fatalf("%d forged callbacks refused of %d", refused, forged)
	}
	for i, gid := range gids {
		rid := fmt.Sprintf("r%d", i)
		_ = gid
		expire(t, honest, rid, end)
		expire(t, noisy, rid, end)
		want, got := honest.state("app", rid), noisy.state("app", rid)
		if !reflect.DeepEqual(want.Seats, got.Seats) || !reflect.DeepEqual(want.Members, got.Members) || !reflect.DeepEqual(want.AudioMarks(), got.AudioMarks()) {
			t.Errorf("%s: the disordered stream left\nseats %v marks %v\nthe honest one\nseats %v marks %v", rid, got.Seats, got.AudioMarks(), want.Seats, want.AudioMarks())
		}
		if w, g := effects(honest, rid), effects(noisy, rid); !reflect.DeepEqual(w, g) {
			t.Errorf("%s: effects differ\n got  %v\n want %v", rid, g, w)
		}
		if len(effects(honest, rid)) == 0 {
			t.Errorf("%s: the honest stream had no effect: the test proves nothing", rid)
		}
	}
}
