package roomgrain

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// The seat race with move policies: 40 members and 3 operators race on
// the 8 seats of one room: members take, release and move (abort); the
// operators move members onto taken seats with force and swap, and take
// people off seats. Asserted by replaying the room's log with the pure
// room package at every seq: a seat is taken only when free, nobody holds
// two seats, every release frees the seat its user held; the replay
// equals GetRoom; forces and swaps did happen (the test exercised them).
func TestSeatPoliciesUnderRace(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	ops := []string{"owner", "admin1", "admin2"}
	f.mustDo(pid, wrap(&v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: "r1", UserId: "owner", Name: "race", AdminUserIds: ops[1:]}))
	var users []string
	for i := range 40 {
		users = append(users, fmt.Sprintf("u%02d", i))
	}
	for _, u := range append(slices.Clone(users), ops[1:]...) {
		f.mustDo(pid, rcJoin("j-"+u, u))
	}
	var seq atomic.Int64
	id := func(who string) string { return fmt.Sprintf("%s-%d", who, seq.Add(1)) }
	do := func(rc *v1.RoomCommand) { _, _ = f.do(pid, rc) }
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(len(u)), uint64(u[2])))
			for range 30 {
				seat := int32(r.IntN(8))
				switch r.IntN(3) {
				case 0:
					do(wrap(&v1.TakeMicRequest{CommandId: id(u), AppCode: "app", RoomId: "r1", UserId: u, Seat: seat}))
				case 1:
					do(wrap(&v1.ReleaseMicRequest{CommandId: id(u), AppCode: "app", RoomId: "r1", UserId: u}))
				default:
					do(wrap(&v1.MoveSeatRequest{CommandId: id(u), AppCode: "app", RoomId: "r1", UserId: u, Seat: seat}))
				}
			}
		}()
	}
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for range 200 {
				target, seat := users[r.IntN(len(users))], int32(r.IntN(8))
				switch k := r.IntN(10); {
				case k < 4:
					do(wrap(&v1.MoveSeatRequest{CommandId: id(op), AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: target, Seat: seat, Policy: room.MoveForce}))
				case k < 8:
					do(wrap(&v1.MoveSeatRequest{CommandId: id(op), AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: target, Seat: seat, Policy: room.MoveSwap}))
				case k < 9:
					do(wrap(&v1.TakeMicRequest{CommandId: id(op), AppCode: "app", RoomId: "r1", UserId: target, Seat: seat}))
				default:
					do(wrap(&v1.KickOffSeatRequest{CommandId: id(op), AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: target}))
				}
			}
		}()
	}
	wg.Wait()

	recs, err := f.store.LoadCommands(t.Context(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := room.NewState("app", "r1")
	var forced, swapped int
	for _, rec := range recs {
		evs, err := persistence.DecodeEvents(rec.Events)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			switch e := e.(type) {
			case room.RoomMicTaken:
				if s.Seats[e.Seat] != "" || s.SeatOf(e.UserID) >= 0 {
					t.Fatalf("seq %d: %s takes seat %d held by %q while on seat %d", rec.Seq, e.UserID, e.Seat, s.Seats[e.Seat], s.SeatOf(e.UserID))
				}
			case room.RoomMicReleased:
				if s.Seats[e.Seat] != e.UserID {
					t.Fatalf("seq %d: %s releases seat %d held by %q", rec.Seq, e.UserID, e.Seat, s.Seats[e.Seat])
				}
				switch e.Reason {
				case room.ReasonDisplaced:
					forced++
				case room.ReasonSwapped:
					swapped++
				}
			}
			s = room.Apply(s, e)
		}
		s = room.ApplyCommand(s, rec.Seq, nil)
		seen := map[string]bool{}
		for _, u := range s.Seats {
			if u != "" && seen[u] {
				t.Fatalf("seq %d: %s on two seats %v", rec.Seq, u, s.Seats)
			}
			seen[u] = true
		}
	}
	live := f.mustDo(pid, rcGet()).GetRoom()
	if want := room.View(s); !proto.Equal(live, want) {
		t.Fatalf("live room\n%v\nreplay\n%v", live, want)
	}
	if forced == 0 || swapped == 0 {
		t.Fatalf("the race exercised %d forced and %d swapped releases: want both", forced, swapped)
	}
	t.Logf("%d commands logged, %d displaced, %d swapped releases", len(recs), forced, swapped/2)
}
