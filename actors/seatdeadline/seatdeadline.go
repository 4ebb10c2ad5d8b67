// Package seatdeadline ends a room's seat applications and invitations at
// their deadlines: an observer of each room (roomgrain.Observer and
// Receiver) that arms one timer for the room's earliest deadline and, when
// it fires, commits the expiry as the room's own command. Wired by
// cmd/roomcell; the grain never imports it.
package seatdeadline

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// A seat application or invitation runs out at a deadline kept in the
// room's state (room.State.NextSeatDeadline). The active room arms one
// timer for its earliest deadline; when it fires, the room commits the
// expiry itself (room.CmdExpireSeatRequests under a reserved command id),
// like any command. The timer is an observer's (Observe), the expiry the
// room's own command through Room.Commit. The timer dies with the
// activation, the deadline does
// not: the next activation (a restart, a failover to another node) arms
// it again from the state it loads, and fires at once for one already
// past. Until the expiry is committed, every decision treats an expired
// request as absent, so a late timer can never let one be approved.

// seatDeadline is the timer's message to its room.
type seatDeadline struct{}

// seatTimers holds the armed timers of a node's rooms, keyed by the
// activation's PID: one map per node (Observe).
type seatTimers struct {
	mu sync.Mutex
	m  map[string]*armedDeadline
}

type armedDeadline struct {
	atMs int64
	t    *time.Timer
}

func newSeatTimers() *seatTimers { return &seatTimers{m: map[string]*armedDeadline{}} }

func pidKey(pid *actor.PID) string { return pid.Address + "/" + pid.Id }

// arm makes the room's timer fire at atMs (0: no timer). Arming the
// deadline already armed keeps the timer.
func (st *seatTimers) arm(sys *actor.ActorSystem, pid *actor.PID, atMs, nowMs int64) {
	key := pidKey(pid)
	st.mu.Lock()
	defer st.mu.Unlock()
	cur := st.m[key]
	if cur != nil {
		if cur.atMs == atMs {
			return
		}
		cur.t.Stop()
		delete(st.m, key)
	}
	if atMs == 0 {
		return
	}
	a := &armedDeadline{atMs: atMs}
	a.t = time.AfterFunc(time.Duration(max(atMs-nowMs, 0))*time.Millisecond, func() {
		st.mu.Lock()
		if st.m[key] == a {
			delete(st.m, key)
		}
		st.mu.Unlock()
		sys.Root.Send(pid, &seatDeadline{})
	})
	st.m[key] = a
}

// armed returns how many rooms of the node have a timer (tests).
func (st *seatTimers) armed() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.m)
}

// Observe makes the observer of the node's rooms that arms each room's
// timer for its earliest seat deadline and commits the expiry when it
// fires (one set of timers for the node, made here: call it once per
// node). The node's wiring lists it in roomgrain.Deps.Observers; without
// it a request expires only when a command decides on it.
func Observe() roomgrain.NewObserver { return observe(newSeatTimers()) }

func observe(st *seatTimers) roomgrain.NewObserver {
	return func(a roomgrain.Activation) roomgrain.Observer {
		o := &seatObserver{st: st, room: a.Room, self: a.Self, root: a.Root, at: -1}
		o.arm()
		return o
	}
}

// seatObserver is one activation's seat deadline timer. Every call is on
// the room's goroutine.
type seatObserver struct {
	st   *seatTimers
	room roomgrain.Room
	self *actor.PID
	root *actor.RootContext
	// at is the deadline armed (0: none; -1: not known, as after the
	// timer fired): a commit that leaves it costs no call to the timers.
	at int64
}

// arm arms the room's timer for its state's earliest deadline, or stops
// it when nothing is pending (arming the deadline already armed keeps
// the timer).
func (o *seatObserver) arm() {
	var at int64
	if o.room.Loaded() {
		at = o.room.State().NextSeatDeadline()
	}
	if at == o.at {
		return
	}
	o.at = at
	o.st.arm(o.root.ActorSystem(), o.self, at, o.room.Now().UnixMilli())
}

func (o *seatObserver) Loaded()                              { o.arm() }
func (o *seatObserver) Committed(room.Command, []room.Event) { o.arm() }
func (o *seatObserver) Stopped()                             { o.st.arm(o.root.ActorSystem(), o.self, 0, 0) }
func (*seatObserver) Check(room.Command) error               { return nil }
func (*seatObserver) Passed(room.Command)                    {}
func (*seatObserver) Applying([]room.Event)                  {}
func (*seatObserver) Tick()                                  {}
func (*seatObserver) Passivating()                           {}

// Receive takes the timer's message.
func (o *seatObserver) Receive(ctx actor.Context) bool {
	if _, ok := ctx.Message().(*seatDeadline); ok {
		o.expire(ctx)
		return true
	}
	return false
}

// seatExpiryRetry is how soon a failed expiry is tried again.
const seatExpiryRetry = time.Second

// expire commits the expiry of every request past its deadline. The
// command id is derived from the seq it is decided at, so two
// activations deciding at one seq write one command (the store's
// command_id and seq fences take the second).
func (o *seatObserver) expire(ctx actor.Context) {
	o.at = -1 // the timer fired: none is armed
	retry := func(err error) {
		o.room.Log().Warn("seat requests: expiry not committed; retrying", "error", err)
		now := o.room.Now()
		o.at = now.Add(seatExpiryRetry).UnixMilli()
		o.st.arm(o.root.ActorSystem(), o.self, o.at, now.UnixMilli())
	}
	if err := o.room.Ready(ctx); err != nil {
		if errclass.CodeOf(err) == errclass.CodeRoomMoved || errors.Is(err, roomgrain.ErrNoCoordinator) {
			return // moved: the room's new activation arms its own timer
		}
		retry(err)
		return
	}
	state := o.room.State()
	if !state.Exists || state.Status != room.StatusOpen {
		o.arm()
		return
	}
	k := o.room.Key()
	cmd := room.Command{Type: room.CmdExpireSeatRequests, CommandID: fmt.Sprintf("%s%d", room.SeatExpireIDPrefix, state.Seq),
		AppCode: k.AppCode, RoomID: k.RoomID, UserID: "room", NowMs: o.room.Now().UnixMilli()}
	events, err := room.Decide(*state, cmd)
	if err != nil {
		retry(err)
		return
	}
	if len(events) > 0 {
		if err := o.room.Commit(ctx, cmd, events); err != nil {
			retry(err)
			return
		}
	}
	o.arm()
}
