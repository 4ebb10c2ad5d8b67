package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/errclass"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// wrap puts a request into the grain protocol's oneof.
func wrap(m proto.Message) *v1.RoomCommand {
	rc := &v1.RoomCommand{}
	fields := rc.ProtoReflect().Descriptor().Oneofs().ByName("command").Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message().FullName() == m.ProtoReflect().Descriptor().FullName() {
			rc.ProtoReflect().Set(f, protoreflect.ValueOfMessage(m.ProtoReflect()))
			return rc
		}
	}
	panic(fmt.Sprintf("wrap: %T is in no oneof field", m))
}

// applyRoom creates app/r1 in apply mode with alice in it.
func applyRoom(f *fixture, pid *actor.PID) {
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("j1", "alice"))
	f.mustDo(pid, wrap(&v1.SetSeatModeRequest{CommandId: "m1", AppCode: "app", RoomId: "r1", UserId: "owner", SeatMode: room.SeatModeApply}))
}

// expiries returns the expiry commands in the room's log and the
// applications they ended.
func expiries(t *testing.T, store persistence.RoomStore) (cmds int, ended []string) {
	t.Helper()
	recs, err := store.LoadCommands(context.Background(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.CommandType != room.CmdExpireSeatRequests {
			continue
		}
		cmds++
		evs, err := decodeEvents(r.Events)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if a, ok := e.(room.RoomSeatApplicationEnded); ok && a.Outcome == room.OutcomeExpired {
				ended = append(ended, a.UserID)
			}
		}
	}
	return cmds, ended
}

// An application runs out by itself: the room commits its expiry when
// the deadline passes, with no command from outside.
func TestSeatApplicationExpiresByItself(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	applyRoom(f, pid)
	f.mustDo(pid, wrap(&v1.ApplySeatRequest{CommandId: "a1", AppCode: "app", RoomId: "r1", UserId: "alice", Seat: 2, TimeoutSeconds: 1}))
	if got := f.mustDo(pid, rcGet()).Room.GetSeatApplications(); len(got) != 1 || got[0].UserId != "alice" || got[0].Seat != 2 {
		t.Fatalf("pending applications %v", got)
	}
	waitFor(t, func() bool { _, ended := expiries(t, f.store); return len(ended) == 1 })
	if got := f.mustDo(pid, rcGet()).Room.GetSeatApplications(); len(got) != 0 {
		t.Fatalf("still pending after expiry: %v", got)
	}
	// An approval after the expiry finds nothing.
	_, err := f.do(pid, wrap(&v1.ApproveSeatApplicationRequest{CommandId: "ap1", AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: "alice"}))
	if !errors.Is(err, room.ErrNoSeatRequest) {
		t.Fatalf("approve after expiry: %v", err)
	}
	if n := f.seats.armed(); n != 0 {
		t.Fatalf("%d timers armed with nothing pending", n)
	}
}

// The deadline lives in the state, not in the timer: a room stopped with
// an application pending (its timer gone with it) and activated again
// after the deadline expires it at once, on this node or another one
// reading the same store (a failover: another actor system with timers
// of its own activates the room; the first never sees it again).
func TestSeatApplicationExpiresAfterRestartAndFailover(t *testing.T) {
	for _, failover := range []bool{false, true} {
		t.Run(fmt.Sprintf("failover=%v", failover), func(t *testing.T) {
			f := newFixture(t)
			pid := f.activate("app/r1")
			applyRoom(f, pid)
			f.mustDo(pid, wrap(&v1.InviteToSeatRequest{CommandId: "i1", AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: "alice", Seat: 5, TimeoutSeconds: 2}))
			f.mustDo(pid, wrap(&v1.ApplySeatRequest{CommandId: "a1", AppCode: "app", RoomId: "r1", UserId: "alice", Seat: 2, TimeoutSeconds: 1}))
			f.sys.Root.Send(f.probe, watch{pid: pid})
			f.sys.Root.Poison(pid)
			expect[*actor.Terminated](t, f.events, 3*time.Second)
			time.Sleep(2100 * time.Millisecond) // both deadlines pass with no room active
			if cmds, _ := expiries(t, f.store); cmds != 0 {
				t.Fatalf("%d expiries committed with no room active", cmds)
			}
			g := f
			if failover {
				g = newFixture(t) // the other node: its own actor system and timers, the same store
				g.store = f.store
				g.deps.Store = f.store
			}
			pid2 := g.activate("app/r1")
			waitFor(t, func() bool { _, ended := expiries(t, g.store); return len(ended) == 1 })
			v := g.mustDo(pid2, rcGet()).Room
			if len(v.GetSeatApplications())+len(v.GetSeatInvitations()) != 0 {
				t.Fatalf("pending after reactivation: %v %v", v.GetSeatApplications(), v.GetSeatInvitations())
			}
			recs, _ := g.store.LoadCommands(context.Background(), grainKey, 0)
			var invEnded int
			for _, r := range recs {
				evs, _ := decodeEvents(r.Events)
				for _, e := range evs {
					if e, ok := e.(room.RoomSeatInvitationEnded); ok && e.Outcome == room.OutcomeExpired {
						invEnded++
					}
				}
			}
			if invEnded != 1 {
				t.Fatalf("invitation expired %d times", invEnded)
			}
		})
	}
}

// A reserved command id is refused from clients: a client spending the
// room's next expiry id would block its expiry.
func TestSeatExpireIDIsReserved(t *testing.T) {
	err := room.CheckClientCommand(rcJoin(room.SeatExpireIDPrefix+"3", "alice"))
	if !errors.Is(err, errclass.Invalid) {
		t.Fatalf("client command with %s id: %v", room.SeatExpireIDPrefix, err)
	}
}

// 200 users race for 8 seats through applications, invitations, direct
// takes (admins), releases, leaves and kicks, all at once. Whatever the
// interleaving, the command log shows at every seq no seat taken while
// held, no user on two seats, and every application and invitation
// ending exactly once.
func TestSeatRace200Users(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, wrap(&v1.SetSeatModeRequest{CommandId: "m1", AppCode: "app", RoomId: "r1", UserId: "owner", SeatMode: room.SeatModeApply}))
	const users, opsPerUser = 200, 40
	exec := func(m proto.Message) { _, _ = f.do(pid, wrap(m)) } // rule errors are expected
	var wg sync.WaitGroup
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(u), 7))
			user := fmt.Sprintf("u%03d", u)
			id := func(op string, i int) string { return fmt.Sprintf("%s-%s-%d", user, op, i) }
			exec(&v1.JoinRoomRequest{CommandId: id("j", 0), AppCode: "app", RoomId: "r1", UserId: user})
			for i := range opsPerUser {
				switch r.IntN(11) {
				case 10:
					exec(&v1.ReleaseMicRequest{CommandId: id("r2", i), AppCode: "app", RoomId: "r1", UserId: user})
				case 0, 1, 2:
					exec(&v1.ApplySeatRequest{CommandId: id("a", i), AppCode: "app", RoomId: "r1", UserId: user, Seat: int32(r.IntN(8)), TimeoutSeconds: 1 + r.Int64N(2)})
				case 3:
					exec(&v1.CancelSeatApplicationRequest{CommandId: id("c", i), AppCode: "app", RoomId: "r1", UserId: user})
				case 4, 5:
					exec(&v1.AcceptSeatInvitationRequest{CommandId: id("acc", i), AppCode: "app", RoomId: "r1", UserId: user})
				case 6:
					exec(&v1.DeclineSeatInvitationRequest{CommandId: id("d", i), AppCode: "app", RoomId: "r1", UserId: user})
				case 7:
					exec(&v1.ReleaseMicRequest{CommandId: id("r", i), AppCode: "app", RoomId: "r1", UserId: user})
				case 8:
					exec(&v1.TakeMicRequest{CommandId: id("t", i), AppCode: "app", RoomId: "r1", UserId: user, Seat: int32(r.IntN(8))})   // refused: apply mode
					exec(&v1.MoveSeatRequest{CommandId: id("mv", i), AppCode: "app", RoomId: "r1", UserId: user, Seat: int32(r.IntN(8))}) // refused: apply mode
				case 9:
					exec(&v1.LeaveRoomRequest{CommandId: id("l", i), AppCode: "app", RoomId: "r1", UserId: user})
					exec(&v1.JoinRoomRequest{CommandId: id("j", i+1), AppCode: "app", RoomId: "r1", UserId: user})
				}
				time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
			}
		}()
	}
	// The owner and an admin work the queue at the same time.
	stop := make(chan struct{})
	var ops sync.WaitGroup
	for _, op := range []string{"owner", "owner", "owner"} {
		ops.Add(1)
		go func() {
			defer ops.Done()
			r := rand.New(rand.NewPCG(rand.Uint64(), 9))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v, err := f.do(pid, rcGet())
				if err != nil {
					continue
				}
				id := fmt.Sprintf("%s-%d-%d", op, r.Uint32(), i)
				target := fmt.Sprintf("u%03d", r.IntN(users))
				if apps := v.Room.GetSeatApplications(); len(apps) > 0 {
					target = apps[r.IntN(len(apps))].UserId
				}
				switch k := min(r.IntN(9), 7); k {
				case 6:
					exec(&v1.InviteToSeatRequest{CommandId: id + "i", AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: fmt.Sprintf("u%03d", r.IntN(users)), Seat: int32(r.IntN(8)), TimeoutSeconds: 2})
				case 0, 1:
					exec(&v1.ApproveSeatApplicationRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: target})
				case 2:
					exec(&v1.RejectSeatApplicationRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: target})
				case 3:
					exec(&v1.InviteToSeatRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: fmt.Sprintf("u%03d", r.IntN(users)), Seat: int32(r.IntN(8)), TimeoutSeconds: 1})
				case 4:
					exec(&v1.KickUserRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: fmt.Sprintf("u%03d", r.IntN(users))})
				case 5:
					exec(&v1.TakeMicRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: op, Seat: int32(r.IntN(8))})
				case 7:
					// Seat moves: an admin moves a seated user, or takes them off.
					seated := slices.DeleteFunc(v.Room.GetSeats(), func(s *v1.Seat) bool { return s.UserId == "" })
					if len(seated) == 0 {
						continue
					}
					who := seated[r.IntN(len(seated))].UserId
					if r.IntN(2) == 0 {
						exec(&v1.MoveSeatRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: who, Seat: int32(r.IntN(8))})
					} else {
						exec(&v1.KickOffSeatRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: op, TargetUserId: who})
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	ops.Wait()
	// A last wave nobody answers: these run out by themselves.
	for u := range 8 {
		user := fmt.Sprintf("late%d", u)
		exec(&v1.JoinRoomRequest{CommandId: user + "-j", AppCode: "app", RoomId: "r1", UserId: user})
		exec(&v1.ApplySeatRequest{CommandId: user + "-a", AppCode: "app", RoomId: "r1", UserId: user, Seat: int32(u), TimeoutSeconds: 1})
	}
	// Let every request still pending run out (timeouts of at most 2 s).
	waitFor(t, func() bool {
		v := f.mustDo(pid, rcGet()).Room
		return len(v.GetSeatApplications())+len(v.GetSeatInvitations()) == 0
	})
	checkSeatLog(t, f.store, true)
}

// checkSeatLog replays the room's command log and checks the seat rules
// at every seq. drained: no request may be pending at the end.
func checkSeatLog(t *testing.T, store persistence.RoomStore, drained bool) {
	t.Helper()
	recs, err := store.LoadCommands(context.Background(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := room.NewState("app", "r1")
	type key struct {
		kind, user string
	}
	pending := map[key]bool{}
	made, ended, taken := 0, 0, 0
	outcomes := map[string]int{}
	releases := map[string]int{}
	for _, r := range recs {
		evs, err := decodeEvents(r.Events)
		if err != nil {
			t.Fatal(err)
		}
		cur := s
		for _, e := range evs {
			switch e := e.(type) {
			case room.RoomMicTaken:
				if cur.Seats[e.Seat] != "" || cur.SeatOf(e.UserID) >= 0 || !cur.IsMember(e.UserID) {
					t.Fatalf("seq %d: %s took seat %d held by %q (their seat %d)", r.Seq, e.UserID, e.Seat, cur.Seats[e.Seat], cur.SeatOf(e.UserID))
				}
				taken++
			case room.RoomMicReleased:
				releases[e.Reason]++
			case room.RoomSeatApplied:
				k := key{"app", e.UserID}
				if pending[k] {
					t.Fatalf("seq %d: second pending application of %s", r.Seq, e.UserID)
				}
				pending[k] = true
				made++
			case room.RoomSeatInvited:
				k := key{"inv", e.UserID}
				if pending[k] {
					t.Fatalf("seq %d: second pending invitation of %s", r.Seq, e.UserID)
				}
				pending[k] = true
				made++
			case room.RoomSeatApplicationEnded:
				k := key{"app", e.UserID}
				if !pending[k] {
					t.Fatalf("seq %d: application of %s ended twice or never made (%s)", r.Seq, e.UserID, e.Outcome)
				}
				delete(pending, k)
				ended++
				outcomes["app:"+e.Outcome]++
			case room.RoomSeatInvitationEnded:
				k := key{"inv", e.UserID}
				if !pending[k] {
					t.Fatalf("seq %d: invitation of %s ended twice or never made (%s)", r.Seq, e.UserID, e.Outcome)
				}
				delete(pending, k)
				ended++
				outcomes["inv:"+e.Outcome]++
			}
			cur = room.Apply(cur, e)
		}
		s.ApplyInPlace(r.Seq, evs)
		seen := map[string]int{}
		for i, u := range s.Seats {
			if u == "" {
				continue
			}
			if j, dup := seen[u]; dup {
				t.Fatalf("seq %d: %s on seats %d and %d", r.Seq, u, j, i)
			}
			seen[u] = i
		}
	}
	if drained && len(pending) != 0 {
		t.Fatalf("%d requests never ended: %v", len(pending), pending)
	}
	t.Logf("%d commands, %d seat takes, %d requests made, %d ended: %v; seat releases by reason %v", len(recs), taken, made, ended, outcomes, releases)
	if made < 100 || releases[room.ReasonMoved] == 0 || releases[room.ReasonKickedOffSeat] == 0 || outcomes["app:"+room.OutcomeApproved] == 0 || outcomes["app:"+room.OutcomeExpired] == 0 || outcomes["inv:"+room.OutcomeAccepted] == 0 {
		t.Fatalf("the race did not exercise the requests: %d made, outcomes %v", made, outcomes)
	}
}
