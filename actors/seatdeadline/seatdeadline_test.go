package seatdeadline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/roomgrain/graintest"
	"github.com/hyapp/roomcell/actors/roomgrain/roomcheck"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

var roomKey = persistence.RoomKey{AppCode: "app", RoomID: "r1"}

// node is one node: its actor system and seat timers, over a store.
type node struct {
	*graintest.Host
	seats *seatTimers
	props *actor.Props
}

func newNode(t *testing.T, store *graintest.Host) *node {
	n := &node{Host: graintest.New(t), seats: newSeatTimers()}
	if store != nil {
		n.Store = store.Store // another node of the same store
	}
	n.props = roomgrain.GrainProps(n.Deps(observe(n.seats)))
	return n
}

// applyRoom creates app/r1 in apply mode with alice in it.
func applyRoom(n *node, pid *actor.PID) {
	n.MustDo(pid, &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: "r1", UserId: "owner", Name: "n"}}})
	n.MustDo(pid, &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{CommandId: "j1", AppCode: "app", RoomId: "r1", UserId: "alice"}}})
	n.MustDo(pid, &v1.RoomCommand{Command: &v1.RoomCommand_SetSeatMode{SetSeatMode: &v1.SetSeatModeRequest{CommandId: "m1", AppCode: "app", RoomId: "r1", UserId: "owner", SeatMode: room.SeatModeApply}}})
}

func apply(seat int32, timeoutSeconds int64) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_ApplySeat{ApplySeat: &v1.ApplySeatRequest{CommandId: "a1", AppCode: "app", RoomId: "r1", UserId: "alice", Seat: seat, TimeoutSeconds: timeoutSeconds}}}
}

func getRoom() *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}}
}

// ended returns the expiry commands in the room's log and the
// applications and invitations they ended.
func ended(t *testing.T, store persistence.RoomStore) (cmds int, apps, invites []string) {
	t.Helper()
	recs, err := store.LoadCommands(context.Background(), roomKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.CommandType != room.CmdExpireSeatRequests {
			continue
		}
		cmds++
		for _, e := range r.Events {
			ev, err := room.DecodeEvent(e.EventType, e.Payload)
			if err != nil {
				t.Fatal(err)
			}
			switch ev := ev.(type) {
			case room.RoomSeatApplicationEnded:
				if ev.Outcome == room.OutcomeExpired {
					apps = append(apps, ev.UserID)
				}
			case room.RoomSeatInvitationEnded:
				if ev.Outcome == room.OutcomeExpired {
					invites = append(invites, ev.UserID)
				}
			}
		}
	}
	return cmds, apps, invites
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An application runs out by itself: the room commits its expiry when
// the deadline passes, with no command from outside.
func TestSeatApplicationExpiresByItself(t *testing.T) {
	n := newNode(t, nil)
	pid := n.Activate(n.props, "app/r1")
	applyRoom(n, pid)
	n.MustDo(pid, apply(2, 1))
	if got := n.MustDo(pid, getRoom()).Room.GetSeatApplications(); len(got) != 1 || got[0].UserId != "alice" || got[0].Seat != 2 {
		t.Fatalf("pending applications %v", got)
	}
	waitFor(t, func() bool { _, apps, _ := ended(t, n.Store); return len(apps) == 1 })
	if got := n.MustDo(pid, getRoom()).Room.GetSeatApplications(); len(got) != 0 {
		t.Fatalf("still pending after expiry: %v", got)
	}
	// An approval after the expiry finds nothing.
	_, err := n.Do(pid, &v1.RoomCommand{Command: &v1.RoomCommand_ApproveSeatApplication{ApproveSeatApplication: &v1.ApproveSeatApplicationRequest{
		CommandId: "ap1", AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: "alice"}}})
	if !errors.Is(err, room.ErrNoSeatRequest) {
		t.Fatalf("approve after expiry: %v", err)
	}
	if k := n.seats.armed(); k != 0 {
		t.Fatalf("%d timers armed with nothing pending", k)
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
			n := newNode(t, nil)
			pid := n.Activate(n.props, "app/r1")
			applyRoom(n, pid)
			n.MustDo(pid, &v1.RoomCommand{Command: &v1.RoomCommand_InviteToSeat{InviteToSeat: &v1.InviteToSeatRequest{
				CommandId: "i1", AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: "alice", Seat: 5, TimeoutSeconds: 2}}})
			n.MustDo(pid, apply(2, 1))
			if err := n.Sys.Root.PoisonFuture(pid).Wait(); err != nil {
				t.Fatalf("room did not stop: %v", err)
			}
			time.Sleep(2100 * time.Millisecond) // both deadlines pass with no room active
			if cmds, _, _ := ended(t, n.Store); cmds != 0 {
				t.Fatalf("%d expiries committed with no room active", cmds)
			}
			g := n
			if failover {
				g = newNode(t, n.Host) // the other node: its own actor system and timers, the same store
			}
			pid2 := g.Activate(g.props, "app/r1")
			waitFor(t, func() bool { _, apps, _ := ended(t, g.Store); return len(apps) == 1 })
			v := g.MustDo(pid2, getRoom()).Room
			if len(v.GetSeatApplications())+len(v.GetSeatInvitations()) != 0 {
				t.Fatalf("pending after reactivation: %v %v", v.GetSeatApplications(), v.GetSeatInvitations())
			}
			if _, _, invites := ended(t, g.Store); len(invites) != 1 {
				t.Fatalf("invitation expired %d times", len(invites))
			}
		})
	}
}

// 200 users race for 8 seats through applications, invitations, direct
// takes (admins), releases, leaves and kicks, all at once. Whatever the
// interleaving, the command log shows at every seq no seat taken while
// held, no user on two seats, and every application and invitation
// ending exactly once.
func TestSeatRace200Users(t *testing.T) {
	n := newNode(t, nil)
	pid := n.Activate(n.props, "app/r1")
	n.MustDo(pid, roomcheck.Wrap(&v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: "r1", UserId: "owner", Name: "n"}))
	n.MustDo(pid, roomcheck.Wrap(&v1.SetSeatModeRequest{CommandId: "m1", AppCode: "app", RoomId: "r1", UserId: "owner", SeatMode: room.SeatModeApply}))
	const users, opsPerUser = 200, 40
	exec := func(m proto.Message) { _, _ = n.Do(pid, roomcheck.Wrap(m)) } // rule errors are expected
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
				v, err := n.Do(pid, getRoom())
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
					// The reply is the room's shared answer, read-only: filter a copy.
					seated := slices.DeleteFunc(slices.Clone(v.Room.GetSeats()), func(s *v1.Seat) bool { return s.UserId == "" })
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
		v := n.MustDo(pid, getRoom()).Room
		return len(v.GetSeatApplications())+len(v.GetSeatInvitations()) == 0
	})
	roomcheck.CheckSeatLog(t, n.Store, true)
}

func rcAudio(id, user, kind string, atMs, graceMs int64) *v1.RoomCommand {
	return roomcheck.Wrap(&v1.AudioPresenceRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: user, Kind: kind, EventTimeMs: atMs, SeatGraceMs: graceMs})
}

// audioReleases counts the seats the room released for a lost audio.
func audioReleases(t *testing.T, n *node) int {
	t.Helper()
	recs, err := n.Store.LoadCommands(context.Background(), roomKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, r := range recs {
		evs, err := persistence.DecodeEvents(r.Events)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if m, ok := e.(room.RoomMicReleased); ok && m.Reason == room.ReasonAudioLeft {
				count++
			}
		}
	}
	return count
}

// A seated member whose audio dropped loses the seat once, by the room's
// own deadline, within the grace plus a second of the exit's event time,
// with nobody sending anything; the same exit reported again changes
// nothing. A member who re-enters within the grace keeps the seat.
func TestAudioExitFreesTheSeatAfterTheGrace(t *testing.T) {
	n := newNode(t, nil)
	pid := n.Activate(n.props, "app/r1")
	n.MustDo(pid, roomcheck.Wrap(&v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: "r1", UserId: "owner", Name: "n"}))
	n.MustDo(pid, roomcheck.Wrap(&v1.JoinRoomRequest{CommandId: "j1", AppCode: "app", RoomId: "r1", UserId: "alice"}))
	n.MustDo(pid, roomcheck.Wrap(&v1.JoinRoomRequest{CommandId: "j2", AppCode: "app", RoomId: "r1", UserId: "bob"}))
	n.MustDo(pid, roomcheck.Wrap(&v1.TakeMicRequest{CommandId: "m1", AppCode: "app", RoomId: "r1", UserId: "alice", Seat: 1}))
	n.MustDo(pid, roomcheck.Wrap(&v1.TakeMicRequest{CommandId: "m2", AppCode: "app", RoomId: "r1", UserId: "bob", Seat: 2}))
	const grace = 400
	exitAt := time.Now().UnixMilli()
	n.MustDo(pid, rcAudio("trtc-a", "alice", room.AudioExit, exitAt, grace))
	n.MustDo(pid, rcAudio("trtc-b", "bob", room.AudioExit, exitAt, grace))
	n.MustDo(pid, rcAudio("trtc-b2", "bob", room.AudioEnter, exitAt+100, grace)) // bob is back within the grace
	if r := n.MustDo(pid, rcAudio("trtc-a", "alice", room.AudioExit, exitAt, grace)); !r.Duplicate {
		t.Fatal("a retried report was not answered as a duplicate")
	}
	waitFor(t, func() bool { return audioReleases(t, n) == 1 })
	if late := time.Now().UnixMilli() - exitAt; late > grace+1000 {
		t.Fatalf("seat freed %d ms after the exit, want within the grace (%d ms) + 1 s", late, grace)
	}
	time.Sleep(2 * grace * time.Millisecond)
	if n := audioReleases(t, n); n != 1 {
		t.Fatalf("%d audio releases, want exactly alice's", n)
	}
	seats := n.MustDo(pid, getRoom()).Room.GetSeats()
	if seats[1].GetUserId() != "" || seats[2].GetUserId() != "bob" {
		t.Fatalf("seats %v: alice's must be free, bob's kept", seats)
	}
}
