package roomgrain

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
)

// fakeLease is one node's lease on every room, set by the test.
type fakeLease struct {
	mu    sync.Mutex
	epoch int64
	ok    bool
}

func (l *fakeLease) Hold(string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch, l.ok
}

func (l *fakeLease) set(epoch int64, ok bool) {
	l.mu.Lock()
	l.epoch, l.ok = epoch, ok
	l.mu.Unlock()
}

func rcLeave(cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: user}}}
}

// node returns a fixture sharing f's store and actor system whose grains
// gate on lease: another node of the same cluster.
func (f *fixture) node(lease *fakeLease) *fixture {
	n := *f
	n.deps.Lease = lease
	return &n
}

func (f *fixture) logLen() int {
	f.t.Helper()
	recs, err := f.store.LoadCommands(context.Background(), grainKey, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return len(recs)
}

// A split brain at the grain: node A froze with room r1
// live, node B took the shard over (higher epoch) and changed the room.
// A copy without the lease answers nothing true: not a read, not a rule
// rejection, not a write; it says errMoved and stops. A copy whose lease
// view is stale (it believes it still holds epoch 5) cannot write: the
// epoch fence refuses it even though the seq it writes is free, and its
// next command finds the room claimed and answers errMoved.
func TestGrainAnswersOnlyUnderItsLease(t *testing.T) {
	base := newFixture(t)
	leaseA, leaseB := &fakeLease{epoch: 5, ok: true}, &fakeLease{}
	nodeA, nodeB := base.node(leaseA), base.node(leaseB)

	a := nodeA.activate("app/r1")
	nodeA.mustDo(a, rcCreate("c1", "owner"))
	nodeA.mustDo(a, rcJoin("c2", "bob"))

	// A freezes; its lease runs out. B takes over and bob leaves.
	leaseA.set(5, false)
	leaseB.set(9, true)
	b := nodeB.activate("app/r1")
	if r := nodeB.mustDo(b, rcLeave("c3", "bob")); r.RoomSeq != 3 {
		t.Fatalf("B's LeaveRoom at seq %d, want 3", r.RoomSeq)
	}

	// A resumes without the lease: every answer is errMoved, the first
	// one a LeaveRoom that A's stale state would reject "not a member".
	base.sys.Root.Send(base.probe, watch{pid: a})
	_, err := nodeA.do(a, rcLeave("c4", "bob"))
	if !errors.Is(err, errMoved) || !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("A without its lease answered LeaveRoom(bob) with %v, want errMoved (retryable, unavailable class)", err)
	}
	if term := expect[*actor.Terminated](t, base.events, 2*time.Second); !term.Who.Equal(a) {
		t.Fatalf("terminated %v, want A's grain %v", term.Who, a)
	}
	a2 := nodeA.activate("app/r1")
	for name, rc := range map[string]*v1.RoomCommand{
		"GetRoom": rcGet(), "LeaveRoom(bob)": rcLeave("c4", "bob"), "JoinRoom(carol)": rcJoin("c5", "carol"),
	} {
		if _, err := nodeA.do(a2, rc); !errors.Is(err, errMoved) {
			t.Fatalf("new activation on A without the lease answered %s with %v, want errMoved", name, err)
		}
		a2 = nodeA.activate("app/r1")
	}
	if n := base.logLen(); n != 3 {
		t.Fatalf("log has %d rows, want 3: A wrote without its lease", n)
	}

	// Worst case: A's lease view is stale and says it still holds epoch
	// 5. Its write of the free seq 3... is fenced (B claimed epoch 9).
	leaseA.set(5, true)
	stale := nodeA.activate("app/r1")
	if _, err := nodeA.do(stale, rcJoin("c6", "dave")); !errors.Is(err, errMoved) {
		t.Fatalf("activation under a stale epoch answered %v, want errMoved (the room's fence is at 9)", err)
	}
	if n := base.logLen(); n != 3 {
		t.Fatalf("log has %d rows after the stale node's write, want 3", n)
	}

	// B still serves, and serves the truth.
	r := nodeB.mustDo(b, rcGet())
	if r.RoomSeq != 3 {
		t.Fatalf("B reads seq %d, want 3", r.RoomSeq)
	}
	for _, m := range r.Room.GetMembers() {
		if m == "bob" {
			t.Fatal("B still lists bob after his LeaveRoom")
		}
	}
}

// A grain that was loaded under one epoch and finds its node holding the
// room under another (the lease was lost and retaken; someone else may
// have written in between) reloads before it answers: no stale read.
func TestGrainReloadsWhenItsEpochChanges(t *testing.T) {
	base := newFixture(t)
	leaseB, leaseC := &fakeLease{epoch: 9, ok: true}, &fakeLease{}
	nodeB, nodeC := base.node(leaseB), base.node(leaseC)
	b := nodeB.activate("app/r1")
	nodeB.mustDo(b, rcCreate("c1", "owner"))
	if r := nodeB.mustDo(b, rcGet()); r.RoomSeq != 1 {
		t.Fatalf("seq %d, want 1", r.RoomSeq)
	}

	// B loses the shard to C (epoch 10), C writes, B retakes it (12).
	leaseB.set(9, false)
	leaseC.set(10, true)
	c := nodeC.activate("app/r1")
	nodeC.mustDo(c, rcJoin("c2", "bob"))
	leaseC.set(10, false)
	leaseB.set(12, true)

	// b is still the same activation if B's lost-shard stop has not
	// reached it yet: it must not answer seq 1.
	r, err := nodeB.do(b, rcGet())
	if err != nil {
		t.Fatalf("GetRoom on B after retaking the room: %v", err)
	}
	if r.RoomSeq != 2 {
		t.Fatalf("B answered seq %d after retaking the room, want 2 (C's write)", r.RoomSeq)
	}
	if rr := nodeB.mustDo(b, rcJoin("c3", "carol")); rr.RoomSeq != 3 {
		t.Fatalf("B's next write at seq %d, want 3", rr.RoomSeq)
	}
}
