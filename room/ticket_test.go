package room_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hyapp/roomcell/room"
)

// TestJoinRightsTable: the ticket rule on hand-built states.
func TestJoinRightsTable(t *testing.T) {
	base := func() room.State {
		s := room.NewState(tApp, tRoom)
		s.Exists, s.Status, s.Owner = true, room.StatusOpen, "owner"
		s.Members = map[string]int64{"owner": t0, "alice": t0, "bob": t0, "carol": t0}
		s.Seats = []string{"owner", "alice", "bob", ""}
		s.Bans = map[string]int64{"eve": t0 + 60_000, "old": t0 - 1}
		return s
	}
	cases := []struct {
		name string
		edit func(*room.State)
		user string
		send bool
		seat int
		err  error
	}{
		{"seated", nil, "alice", true, 1, nil},
		{"member without a seat", nil, "carol", false, -1, nil},
		{"seat muted", func(s *room.State) { s.MutedSeats = []int{1} }, "alice", false, 1, nil},
		{"seat locked under them", func(s *room.State) { s.LockedSeats = []int{2} }, "bob", false, 2, nil},
		{"another seat muted", func(s *room.State) { s.MutedSeats = []int{2} }, "alice", true, 1, nil},
		{"stranger", nil, "mallory", false, 0, room.ErrNotMember},
		{"banned stranger", nil, "eve", false, 0, room.ErrBanned},
		{"banned member", func(s *room.State) { s.Members["eve"] = t0 }, "eve", false, 0, room.ErrBanned},
		{"ban over, not a member", nil, "old", false, 0, room.ErrNotMember},
		{"closed", func(s *room.State) { s.Status = room.StatusClosed }, "alice", false, 0, room.ErrRoomClosed},
		{"no room", func(s *room.State) { *s = room.NewState(tApp, tRoom) }, "alice", false, 0, room.ErrRoomNotFound},
	}
	for _, c := range cases {
		s := base()
		if c.edit != nil {
			c.edit(&s)
		}
		r, err := room.JoinRightsOf(s, c.user, t0)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Fatalf("%s: %v, want %v", c.name, err, c.err)
			}
			continue
		}
		if err != nil || r.SendAudio != c.send || r.Seat != c.seat {
			t.Fatalf("%s: %+v %v, want send=%v seat=%d", c.name, r, err, c.send, c.seat)
		}
	}
}

// rightsOracle states the ticket rule a second way, from the room's
// view as clients see it, to check JoinRightsOf against.
func rightsOracle(s room.State, user string, nowMs int64) (enter, send bool) {
	if !s.Exists || s.Status != room.StatusOpen {
		return false, false
	}
	if until, ok := s.Bans[user]; ok && until > nowMs {
		return false, false
	}
	if _, ok := s.Members[user]; !ok {
		return false, false
	}
	for _, seat := range room.Summary(s).GetSeats() {
		if seat.GetUserId() == user {
			return true, !seat.GetMuted() && !seat.GetLocked()
		}
	}
	return true, false
}

// TestJoinRightsFollowRandomRooms walks random rooms (the property
// test's command generator) and checks, after every command, for every
// user: the rights agree with the oracle; and rights that shrank are
// either the user's own doing or named by an event AudioRevoked
// recognizes (or the room closed, which dismisses the audio room), so
// the effect that removes them from the audio room always has an event
// to hang on.
func TestJoinRightsFollowRandomRooms(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 77))
			sm := &sim{r: r, users: []string{"owner", "admin", "u1", "u2", "u3", "u4", "u5"}, now: t0,
				closeAt: 1500, eventIDs: map[string]bool{}, seen: map[string]int{}, closedAt: -1, seats: 1 + r.IntN(4)}
			s := room.NewState(tApp, tRoom)
			shrinks := map[string]int{}
			for step := range 2500 {
				c := sm.next(step, s)
				evs, err := room.Decide(s, c)
				if err != nil || !room.Mutates(c.Type) || len(evs) == 0 {
					continue
				}
				post := room.ApplyCommand(s, s.Seq+1, evs)
				for _, u := range sm.users {
					before, errBefore := room.JoinRightsOf(s, u, c.NowMs)
					after, errAfter := room.JoinRightsOf(post, u, c.NowMs)
					enter, send := rightsOracle(post, u, c.NowMs)
					if (errAfter == nil) != enter || after.SendAudio != send {
						t.Fatalf("step %d %s: %s rights %+v %v, oracle enter=%v send=%v", step, c.Type, u, after, errAfter, enter, send)
					}
					lostEnter := errBefore == nil && errAfter != nil
					lostSend := before.SendAudio && !after.SendAudio
					if !lostEnter && !lostSend {
						continue
					}
					if c.UserID == u && slices.Contains([]string{room.CmdLeaveRoom, room.CmdReleaseMic, room.CmdMoveSeat, room.CmdTakeMic}, c.Type) {
						continue // their own doing
					}
					if c.Type == room.CmdExpireSeatRequests && slices.Contains(evs, room.Event(room.RoomUserLeft{UserID: u, Reason: room.ReasonHeartbeatTimeout})) {
						continue // gone from the presence source: the stale worker's heartbeat_timeout leave, from the room's deadline
					}
					named := false
					for _, ev := range evs {
						if who, ok := room.AudioRevoked(ev); ok && who == u {
							named = true
						}
						if _, closed := ev.(room.RoomClosed); closed {
							named = true
						}
					}
					if !named {
						t.Fatalf("step %d %s by %s: %s lost rights (%+v -> %+v %v) and no event names them: %#v", step, c.Type, c.UserID, u, before, after, errAfter, evs)
					}
					shrinks[c.Type]++
				}
				s = post
			}
			if len(shrinks) < 3 {
				t.Fatalf("the walk shrank rights through too few commands to prove much: %v", shrinks)
			}
			t.Log(shrinks)
		})
	}
}
