package roomgrain

import (
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/room"
)

// A seat application or invitation runs out at a deadline kept in the
// room's state (room.State.NextSeatDeadline). The active room arms one
// timer for its earliest deadline; when it fires, the room commits the
// expiry itself (room.CmdExpireSeatRequests under a reserved command id),
// like any command. The timer dies with the activation, the deadline does
// not: the next activation (a restart, a failover to another node) arms
// it again from the state it loads, and fires at once for one already
// past. Until the expiry is committed, every decision treats an expired
// request as absent, so a late timer can never let one be approved.

// seatDeadline is the timer's message to its room.
type seatDeadline struct{}

// seatTimers holds the armed timers of a node's rooms, keyed by the
// activation's PID: one map per node instead of a field in every grain
// (the grain is at its size class, grainsize_test.go).
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

// armSeatDeadline arms the room's timer for its state's earliest
// deadline, or stops it when no request is pending.
func (g *grain) armSeatDeadline(ctx actor.Context) {
	if g.deps.seatTimers == nil {
		return
	}
	var at int64
	if g.loaded {
		at = g.state.NextSeatDeadline()
	}
	g.deps.seatTimers.arm(ctx.ActorSystem(), ctx.Self(), at, g.deps.Clock().UnixMilli())
}

func (g *grain) disarmSeatDeadline(ctx actor.Context) {
	if g.deps.seatTimers != nil {
		g.deps.seatTimers.arm(ctx.ActorSystem(), ctx.Self(), 0, 0)
	}
}

// seatExpiryRetry is how soon a failed expiry is tried again.
const seatExpiryRetry = time.Second

// expireSeatRequests commits the expiry of every request past its
// deadline. The command id is derived from the seq it is decided at, so
// two activations deciding at one seq write one command (the store's
// command_id and seq fences take the second).
func (g *grain) expireSeatRequests(ctx actor.Context) {
	retry := func(err error) {
		g.log.Warn("seat requests: expiry not committed; retrying", "error", err)
		g.deps.seatTimers.arm(ctx.ActorSystem(), ctx.Self(), g.deps.Clock().Add(seatExpiryRetry).UnixMilli(), g.deps.Clock().UnixMilli())
	}
	if err := g.gate(ctx); err != nil {
		return // moved: the room's new activation arms its own timer
	}
	if !g.loaded {
		if err := g.load(); err != nil {
			retry(err)
			return
		}
	}
	if !g.state.Exists || g.state.Status != room.StatusOpen {
		g.armSeatDeadline(ctx)
		return
	}
	k := g.key()
	cmd := room.Command{Type: room.CmdExpireSeatRequests, CommandID: fmt.Sprintf("%s%d", room.SeatExpireIDPrefix, g.state.Seq),
		AppCode: k.AppCode, RoomID: k.RoomID, UserID: "room", NowMs: g.deps.Clock().UnixMilli()}
	events, err := room.Decide(g.state, cmd)
	if err != nil {
		retry(err)
		return
	}
	if len(events) > 0 {
		if _, err := g.commit(ctx, cmd, events); err != nil {
			retry(err)
			return
		}
	}
	g.armSeatDeadline(ctx)
}
