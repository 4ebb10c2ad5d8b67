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
// before the next round (0: at once) and its result, which RunNow hands
// to its caller as it is (T: the worker's own result type).
type Round[T any] func(ctx context.Context) (next time.Duration, result T)

// PollerSpec describes a polling worker.
type PollerSpec[T any] struct {
	// Name is the actor's name under its Supervisor and its worker label.
	Name string
	// New returns the round of a new incarnation. It is called on start
	// and after every restart, so per-incarnation state (a lease owner, a
	// scan cursor) starts afresh and a crashed incarnation's leases expire
	// instead of being inherited.
	New func() Round[T]
	// FirstDelay is the wait before an incarnation's first round (0: at
	// once).
	FirstDelay time.Duration
}

// ErrStopped: the poller is stopping; no round ran.
var ErrStopped = errors.New("supervise: poller stopped")

type runNow struct{ reply bool }

type runNowReply[T any] struct{ result T }

// Poller is a running polling worker: the one shell of every polling
// worker (the relay, the MQ fanout, the notice workers, presence, purge,
// the gift reconciler), and the handle its starter returns. It owns the
// tick (one pending tick at most, never multiplied by restarts), the
// restart (its Supervisor's policy), the kick (Kick, RunNow) and the stop
// with wait.
type Poller[T any] struct {
	system *actor.ActorSystem
	pid    *actor.PID
	stop   context.CancelFunc
	health *Health
	name   string
	kicked atomic.Bool
}

type pollerActor[T any] struct {
	ctx    context.Context
	spec   PollerSpec[T]
	health *Health
	kicked *atomic.Bool
	round  Round[T]
	ticker Ticker
}

// StartPoller spawns spec's worker as a child of sup.
func StartPoller[T any](sup *Supervisor, spec PollerSpec[T]) (*Poller[T], error) {
	if spec.Name == "" || spec.New == nil {
		return nil, errors.New("supervise: a poller needs a Name and New")
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Poller[T]{system: sup.System(), stop: cancel, health: sup.health, name: spec.Name}
	pid, err := sup.Spawn(spec.Name, actor.PropsFromProducer(func() actor.Actor {
		return &pollerActor[T]{ctx: ctx, spec: spec, health: sup.health, kicked: &p.kicked}
	}))
	if err != nil {
		cancel()
		return nil, err
	}
	p.pid = pid
	return p, nil
}

func (a *pollerActor[T]) Receive(c actor.Context) {
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
		next, res, ran := a.runResult()
		if m.reply && c.Sender() != nil {
			if ran {
				c.Respond(&runNowReply[T]{result: res})
			} else {
				c.Respond(ErrStopped)
			}
		}
		a.schedule(c, next)
	case *actor.Restarting, *actor.Stopping:
		// Both: a timer left running across a restart would add a second
		// tick chain per restart.
		a.ticker.Cancel()
	}
}

func (a *pollerActor[T]) run() time.Duration {
	next, _, _ := a.runResult()
	return next
}

// runResult runs a round unless the poller is stopping (ran false).
func (a *pollerActor[T]) runResult() (next time.Duration, res T, ran bool) {
	if a.ctx.Err() != nil {
		return 0, res, false
	}
	next, res = a.round(a.ctx)
	return next, res, true
}

func (a *pollerActor[T]) schedule(c actor.Context, d time.Duration) {
	if a.ctx.Err() == nil {
		a.ticker.Schedule(c, d)
	}
}

// PID is the worker actor's PID.
func (p *Poller[T]) PID() *actor.PID { return p.pid }

// Kick asks for a round now without waiting. Kicks while one is already
// queued are dropped: one round picks up everything due.
func (p *Poller[T]) Kick() {
	if p.kicked.CompareAndSwap(false, true) {
		p.system.Root.Send(p.pid, &runNow{})
	}
}

// RunNow runs a round now and returns its result (ErrStopped when the
// poller is stopping and ran none). The tick is rescheduled after it.
func (p *Poller[T]) RunNow(timeout time.Duration) (T, error) {
	var zero T
	res, err := p.system.Root.RequestFuture(p.pid, &runNow{reply: true}, timeout).Result()
	if err != nil {
		return zero, fmt.Errorf("supervise: %s run now: %w", p.name, err)
	}
	switch r := res.(type) {
	case *runNowReply[T]:
		return r.result, nil
	case error:
		return zero, r
	}
	return zero, fmt.Errorf("supervise: %s run now answered %T", p.name, res)
}

// Running reports whether the worker is up (not waiting for a restart).
func (p *Poller[T]) Running() bool {
	return p.health == nil || !slices.Contains(p.health.Down(), p.name)
}

// Stop: no new round starts and the running one sees its ctx cancelled;
// then the actor stops. It waits at most timeout. A worker waiting for its
// restart has a suspended mailbox that would never see a poison pill, so
// it is stopped with a system message instead.
func (p *Poller[T]) Stop(timeout time.Duration) error {
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
