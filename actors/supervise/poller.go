package supervise

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Round is one round of a polling worker. ctx is cancelled by
// Poller.Stop: the round should stop between items. It returns the wait
// before the next round (0: at once) and a result for RunNow callers.
type Round func(ctx context.Context) (next time.Duration, result any)

// PollerSpec describes a polling worker.
type PollerSpec struct {
	// Name is the actor's name under its Supervisor and its worker label.
	Name string
	// New returns the round of a new incarnation. It is called on start
	// and after every restart, so per-incarnation state (a lease owner, a
	// scan cursor) starts afresh and a crashed incarnation's leases expire
	// instead of being inherited.
	New func() Round
	// FirstDelay is the wait before an incarnation's first round (0: at
	// once).
	FirstDelay time.Duration
}

// ErrStopped: the poller is stopping; no round ran.
var ErrStopped = errors.New("supervise: poller stopped")

type runNow struct{ reply bool }

type runNowReply struct{ result any }

// Poller is a running polling worker: the one shell of the relay, the
// notice workers and the presence worker. It owns the tick (one pending
// tick at most, never multiplied by restarts), the restart (its
// Supervisor's policy), the kick (RunNow) and the stop with wait.
type Poller struct {
	system *actor.ActorSystem
	pid    *actor.PID
	stop   context.CancelFunc
	health *Health
	name   string
	kicked atomic.Bool
}

type pollerActor struct {
	ctx    context.Context
	spec   PollerSpec
	health *Health
	kicked *atomic.Bool
	round  Round
	ticker Ticker
}

// StartPoller spawns spec's worker as a child of sup.
func StartPoller(sup *Supervisor, spec PollerSpec) (*Poller, error) {
	if spec.Name == "" || spec.New == nil {
		return nil, errors.New("supervise: a poller needs a Name and New")
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Poller{system: sup.System(), stop: cancel, health: sup.health, name: spec.Name}
	pid, err := sup.Spawn(spec.Name, actor.PropsFromProducer(func() actor.Actor {
		return &pollerActor{ctx: ctx, spec: spec, health: sup.health, kicked: &p.kicked}
	}))
	if err != nil {
		cancel()
		return nil, err
	}
	p.pid = pid
	return p, nil
}

func (a *pollerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		if a.health != nil {
			a.health.markUp(a.spec.Name)
		}
		a.round = a.spec.New()
		if a.spec.FirstDelay > 0 {
			a.schedule(c, a.spec.FirstDelay)
		} else {
			a.schedule(c, a.run())
		}
	case *Tick:
		if !a.ticker.Owns(m) {
			return // sent to an earlier incarnation
		}
		a.schedule(c, a.run())
	case *runNow:
		a.kicked.Store(false)
		next, res := a.runResult()
		if m.reply && c.Sender() != nil {
			c.Respond(&runNowReply{result: res})
		}
		a.schedule(c, next)
	case *actor.Restarting, *actor.Stopping:
		// Both: a timer left running across a restart would add a second
		// tick chain per restart.
		a.ticker.Cancel()
	}
}

func (a *pollerActor) run() time.Duration {
	next, _ := a.runResult()
	return next
}

func (a *pollerActor) runResult() (time.Duration, any) {
	if a.ctx.Err() != nil {
		return 0, nil
	}
	return a.round(a.ctx)
}

func (a *pollerActor) schedule(c actor.Context, d time.Duration) {
	if a.ctx.Err() == nil {
		a.ticker.Schedule(c, d)
	}
}

// PID is the worker actor's PID.
func (p *Poller) PID() *actor.PID { return p.pid }

// Kick asks for a round now without waiting. Kicks while one is already
// queued are dropped: one round picks up everything due.
func (p *Poller) Kick() {
	if p.kicked.CompareAndSwap(false, true) {
		p.system.Root.Send(p.pid, &runNow{})
	}
}

// RunNow runs a round now and returns its result. The tick is rescheduled
// after it.
func (p *Poller) RunNow(timeout time.Duration) (any, error) {
	res, err := p.system.Root.RequestFuture(p.pid, &runNow{reply: true}, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("supervise: %s run now: %w", p.name, err)
	}
	return res.(*runNowReply).result, nil
}

// Running reports whether the worker is up (not waiting for a restart).
func (p *Poller) Running() bool {
	return p.health == nil || !slices.Contains(p.health.Down(), p.name)
}

// Stop: no new round starts and the running one sees its ctx cancelled;
// then the actor stops. It waits at most timeout. A worker waiting for its
// restart has a suspended mailbox that would never see a poison pill, so
// it is stopped with a system message instead.
func (p *Poller) Stop(timeout time.Duration) error {
	p.stop()
	if !p.Running() {
		p.system.Root.Stop(p.pid)
	}
	err := StopAndWait(p.system, p.pid, timeout)
	if p.health != nil {
		p.health.markUp(p.name) // stopped on purpose: not "down"
	}
	return err
}
