package notice

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/supervise"
)

// RunNow asks a worker for a round right away (the MQ consumer after an
// ingest, an operator's requeue). Sends are coalesced by Running.Kick.
type RunNow struct{}

type workerActor struct {
	// ctx is cancelled by Running.Stop: no round starts after that and
	// the running one stops between sends.
	ctx    context.Context
	deps   Deps
	kicked *atomic.Bool
	ticker supervise.Ticker
	w      *Worker
}

func props(ctx context.Context, deps Deps, kicked *atomic.Bool) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		d := deps
		// One lease owner per incarnation: rows a crashed incarnation held
		// come back only when their lease expires. The scanner restarts
		// from the stored cursor too (a new Worker has not held it).
		d.Owner = supervise.LeaseOwner(d.NodeID)
		w, err := NewWorker(d)
		if err != nil {
			// Start validated deps; a failure here is a bug.
			panic(err)
		}
		return &workerActor{ctx: ctx, deps: d, kicked: kicked, w: w}
	})
}

// Receive: Started → a round at once; Tick → a round; RunNow → a round;
// after each round the next tick is scheduled (at once after a full round,
// else after poll_interval), so a slow round delays the next one instead of
// queueing ticks. Restarting and Stopping cancel the timer.
func (a *workerActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.next(c, a.round())
	case *supervise.Tick:
		if !a.ticker.Owns(m) {
			return // sent to an earlier incarnation
		}
		a.next(c, a.round())
	case *RunNow:
		a.kicked.Store(false)
		a.next(c, a.round())
	case *actor.Restarting, *actor.Stopping:
		// Both: a timer left running across a restart would add a second
		// tick chain per restart.
		a.ticker.Cancel()
	}
}

type roundResult struct {
	res Result
	err error
}

func (a *workerActor) round() roundResult {
	if a.ctx.Err() != nil {
		return roundResult{}
	}
	res, err := a.w.Round(a.ctx)
	if err != nil {
		a.deps.Logger.Error("notice round failed: retrying next poll", slog.String("worker", a.deps.Module.Name),
			slog.String("node_id", a.deps.NodeID), slog.String("error", supervise.ErrorText(err)))
	}
	return roundResult{res, err}
}

// next schedules the next round: at once when this one scanned or claimed
// a full batch without a failure, so a backlog drains at IM speed instead
// of batch_size per poll; failures always wait for the poll, so an IM
// outage does not become a tight loop.
func (a *workerActor) next(c actor.Context, last roundResult) {
	if a.ctx.Err() != nil {
		return
	}
	r := last.res
	delay := a.deps.Config.PollInterval
	clean := last.err == nil && r.Retryable+r.Failed+r.StoreErrors == 0
	if clean && (r.ScanMore || r.Claimed >= a.deps.Config.BatchSize) {
		delay = 0
	}
	a.ticker.Schedule(c, delay)
}

// Running is a started notice worker actor.
type Running struct {
	system *actor.ActorSystem
	pid    *actor.PID
	stop   context.CancelFunc
	kicked *atomic.Bool
}

// Start validates deps and spawns the worker as the child deps.Module.Name
// of sup (restarted by sup's strategy on a panic). It does not look at
// Config.Enabled: the caller decides.
func Start(sup *supervise.Supervisor, deps Deps) (*Running, error) {
	d, err := deps.normalized()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	kicked := &atomic.Bool{}
	pid, err := sup.Spawn(d.Module.Name, props(ctx, d, kicked))
	if err != nil {
		cancel()
		return nil, err
	}
	return &Running{system: sup.System(), pid: pid, stop: cancel, kicked: kicked}, nil
}

// PID is the worker actor's PID.
func (r *Running) PID() *actor.PID { return r.pid }

// Kick asks for a round now. Kicks while one is already queued are
// dropped: one round picks up everything due.
func (r *Running) Kick() {
	if r.kicked.CompareAndSwap(false, true) {
		r.system.Root.Send(r.pid, &RunNow{})
	}
}

// Stop: no new round starts; sends in flight get the rest of send_timeout
// and their marks; claimed rows not started are released; then the actor
// stops. It waits at most timeout (send_timeout plus a few seconds is
// enough) and must run before the store closes.
func (r *Running) Stop(timeout time.Duration) error {
	r.stop()
	return supervise.StopAndWait(r.system, r.pid, timeout)
}
