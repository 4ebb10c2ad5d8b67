package roomgrain

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// recorder is an Observer that writes down each call with what it saw of
// the room then, and refuses commands of one user.
type recorder struct {
	name   string
	r      Room
	refuse string // Check refuses this user's commands

	mu    sync.Mutex
	calls []string
}

func (o *recorder) add(format string, args ...any) {
	o.mu.Lock()
	o.calls = append(o.calls, o.name+":"+fmt.Sprintf(format, args...))
	o.mu.Unlock()
}

func (o *recorder) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.calls)
}

func (o *recorder) Loaded() { o.add("loaded") }
func (o *recorder) Check(cmd room.Command) error {
	o.add("check %s", cmd.Type)
	if cmd.UserID == o.refuse {
		return fmt.Errorf("%w: refused by %s", errclass.Precondition, o.name)
	}
	return nil
}
func (o *recorder) Passed(cmd room.Command) { o.add("passed %s", cmd.Type) }
func (o *recorder) Applying([]room.Event) {
	o.add("applying members=%d seq=%d", len(o.r.State().Members), o.r.State().Seq)
}
func (o *recorder) Committed(cmd room.Command, _ []room.Event) {
	o.add("committed %s members=%d seq=%d", cmd.Type, len(o.r.State().Members), o.r.State().Seq)
}
func (o *recorder) Tick()        { o.add("tick") }
func (o *recorder) Passivating() { o.add("passivating") }
func (o *recorder) Stopped()     { o.add("stopped") }

// observeWith sets f's observers: a and b, in that order, and one that
// declines (nil), between them.
func observeWith(f *fixture, a, b *recorder) {
	f.deps.Observers = []NewObserver{
		func(act Activation) Observer {
			a.r = act.Room
			a.add("activated %s loaded=%v", act.Room.Key(), act.Room.Loaded())
			// It ticks the room itself (the test does): the room checks
			// its idleness on the ticks.
			act.Room.TicksEvery(20 * time.Millisecond)
			return a
		},
		func(Activation) Observer { return nil },
		func(act Activation) Observer { b.r = act.Room; return b },
	}
}

// The grain calls its observers, in order, at each point of a room's life
// and nowhere else: activation, Check before a change is decided (its
// error refuses the command, and the next observer is not asked),
// Applying with the state before and Committed with the state after a
// stored command, Passed after a heartbeat, Tick, and Passivating then
// Stopped when it idles out. A read calls nothing. A room an observer
// ticks (TicksEvery) idles out on the ticks, not before its idle timeout.
func TestObserversFollowTheRoomInOrder(t *testing.T) {
	const idle = 300 * time.Millisecond
	f := newFixture(t)
	f.deps.Config.IdleTimeout = idle
	a, b := &recorder{name: "a", refuse: "mallory"}, &recorder{name: "b"}
	observeWith(f, a, b)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("j1", "bob"))
	if _, err := f.do(pid, rcJoin("j2", "mallory")); !errors.Is(err, errclass.Precondition) {
		t.Fatalf("join refused by an observer: %v, want its precondition error", err)
	}
	f.mustDo(pid, &v1.RoomCommand{Command: &v1.RoomCommand_Heartbeat{Heartbeat: &v1.HeartbeatRequest{AppCode: "app", RoomId: "r1", UserId: "bob"}}})
	f.mustDo(pid, rcGet())
	last := time.Now()
	for deadline := time.Now().Add(5 * time.Second); !slices.Contains(a.seen(), "a:stopped"); {
		if time.Now().After(deadline) {
			t.Fatalf("the ticked room did not idle out within 5s: %q", a.seen())
		}
		f.sys.Root.Send(pid, Tick)
		time.Sleep(20 * time.Millisecond)
	}
	if gone := time.Since(last); gone < idle {
		t.Fatalf("idled out %s after its last command, before the idle timeout %s", gone, idle)
	}
	// Ticks before the one that found the room idle reach the observers.
	ticksOnly := func(calls []string, tick string) []string {
		var out []string
		for i, c := range calls {
			if c != tick || i == 0 || calls[i-1] != tick {
				out = append(out, c)
			}
		}
		return out
	}

	wantA := []string{
		"a:activated app/r1 loaded=true",
		"a:check CreateRoom", "a:applying members=0 seq=0", "a:committed CreateRoom members=1 seq=1",
		"a:check JoinRoom", "a:applying members=1 seq=1", "a:committed JoinRoom members=2 seq=2",
		"a:check JoinRoom",
		"a:passed Heartbeat",
		"a:tick",
		"a:passivating", "a:stopped",
	}
	if got := ticksOnly(a.seen(), "a:tick"); !slices.Equal(got, wantA) {
		t.Fatalf("first observer saw\n%q\nwant\n%q", got, wantA)
	}
	wantB := []string{
		"b:check CreateRoom", "b:applying members=0 seq=0", "b:committed CreateRoom members=1 seq=1",
		"b:check JoinRoom", "b:applying members=1 seq=1", "b:committed JoinRoom members=2 seq=2",
		"b:passed Heartbeat",
		"b:tick",
		"b:passivating", "b:stopped",
	}
	if got := ticksOnly(b.seen(), "b:tick"); !slices.Equal(got, wantB) {
		t.Fatalf("second observer saw\n%q\nwant\n%q", got, wantB)
	}
	recs, err := f.store.LoadCommands(t.Context(), grainKey, 0)
	if err != nil || len(recs) != 2 {
		t.Fatalf("stored %d commands (%v), want 2: the refused join is not stored", len(recs), err)
	}
}

// A Commit an observer sends is committed through the command path once
// per command_id (a resend is dropped), and only while the room is open;
// the observers see it committed like any command.
func TestObserverCommitIsCommittedOnceWhileOpen(t *testing.T) {
	f := newFixture(t)
	a, b := &recorder{name: "a"}, &recorder{name: "b"}
	observeWith(f, a, b)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	rank := &Commit{Type: "RankChanged", CommandID: room.RankIDPrefix + "1-2-1", Events: []room.Event{room.RoomRankChanged{Rank: 1, PrevRank: 2, Heat: 5}}}
	f.sys.Root.Send(pid, rank)
	f.sys.Root.Send(pid, rank)
	if got := f.mustDo(pid, rcGet()).RoomSeq; got != 2 {
		t.Fatalf("room seq %d after a Commit sent twice, want 2", got)
	}
	f.mustDo(pid, &v1.RoomCommand{Command: &v1.RoomCommand_CloseRoom{CloseRoom: &v1.CloseRoomRequest{
		CommandId: "x1", AppCode: "app", RoomId: "r1", UserId: "owner"}}})
	f.sys.Root.Send(pid, &Commit{Type: "RankChanged", CommandID: room.RankIDPrefix + "3-1-2", Events: []room.Event{room.RoomRankChanged{Rank: 2, PrevRank: 1}}})
	if got := f.mustDo(pid, rcGet()).RoomSeq; got != 3 {
		t.Fatalf("room seq %d after a Commit to a closed room, want 3", got)
	}
	recs, err := f.store.LoadCommands(t.Context(), grainKey, 0)
	if err != nil || len(recs) != 3 || recs[1].CommandType != "RankChanged" || recs[1].CommandID != rank.CommandID {
		t.Fatalf("command log %+v (%v), want the rank commit once at seq 2", recs, err)
	}
	if !slices.Contains(a.seen(), "a:committed RankChanged members=1 seq=2") {
		t.Fatalf("observer did not see the commit: %q", a.seen())
	}
}

// A write after an append whose outcome was unknown reloads the state
// first, and the observers are told (Loaded) before the write is checked;
// Room.State reads the reloaded state from then on.
func TestObserversAreToldOfAReload(t *testing.T) {
	f := newFixture(t)
	flaky := &flakyStore{Store: f.store}
	f.deps.Store = flaky
	a, b := &recorder{name: "a"}, &recorder{name: "b"}
	observeWith(f, a, b)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	flaky.down.Store(true)
	if _, err := f.do(pid, rcJoin("j1", "bob")); !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("join with the store down: %v, want unavailable", err)
	}
	flaky.down.Store(false)
	f.mustDo(pid, rcJoin("j1", "bob"))
	got := a.seen()
	i := slices.Index(got, "a:loaded")
	if i < 0 || !slices.Equal(got[i:], []string{"a:loaded", "a:check JoinRoom", "a:applying members=1 seq=1", "a:committed JoinRoom members=2 seq=2"}) {
		t.Fatalf("observer saw %q, want a reload (loaded) before the join is checked and committed", got)
	}
	f.mustDo(pid, rcGet()) // the room's goroutine is done with the join
	if m := a.r.State().Members; len(m) != 2 {
		t.Fatalf("observer reads members %v after the reload and join, want owner and bob", m)
	}
}

// owner is an observer that owns one message type: it answers it, and
// sees the stored envelopes of each command.
type owner struct {
	recorder
	recorded []int64
}

type ownMessage struct{}

func (o *owner) Receive(ctx actor.Context) bool {
	if _, ok := ctx.Message().(*ownMessage); !ok {
		return false
	}
	ctx.Respond("mine")
	return true
}

func (o *owner) Recorded(seq int64, envs []persistence.Envelope) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range envs {
		if e.RoomSeq != seq {
			panic(fmt.Sprintf("envelope of seq %d recorded at %d", e.RoomSeq, seq))
		}
	}
	o.recorded = append(o.recorded, seq)
}

// A message the grain does not know reaches the observer that owns it;
// a request nobody owns (a node wired without the room's feed) is
// refused at once, in the unavailable class, not left to time out; and
// the owner sees each stored command's envelopes, in seq order.
func TestObserversTakeTheirOwnMessagesAndTheRestIsRefused(t *testing.T) {
	f := newFixture(t)
	o := &owner{recorder: recorder{name: "o"}}
	f.deps.Observers = []NewObserver{func(a Activation) Observer { o.r = a.Room; return o }}
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("j1", "alice"))
	res, err := f.sys.Root.RequestFuture(pid, &ownMessage{}, time.Second).Result()
	if err != nil || res != "mine" {
		t.Fatalf("own message answered %v, %v", res, err)
	}
	begin := time.Now()
	res, err = f.sys.Root.RequestFuture(pid, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1"}, 2*time.Second).Result()
	if err != nil {
		t.Fatalf("a request no observer owns was not answered: %v", err)
	}
	r, ok := res.(*v1.RoomResponse)
	if !ok || r.Error == nil || !errors.Is(errorOf(r.Error), errclass.Unavailable) {
		t.Fatalf("a request no observer owns answered %v", res)
	}
	if d := time.Since(begin); d > time.Second {
		t.Fatalf("refused after %v", d)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !slices.Equal(o.recorded, []int64{1, 2}) {
		t.Fatalf("recorded seqs %v, want [1 2]", o.recorded)
	}
}
