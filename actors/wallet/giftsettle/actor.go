package giftsettle

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/supervise"
)

type worker struct {
	ctx    context.Context
	deps   Deps
	ticker supervise.Ticker
}

// Props is the reconciler actor: a pass on Started, then one per Interval
// (scheduled after a pass ends, so passes never overlap or queue). A full
// batch settled without failures runs the next pass at once, so a backlog
// left by an outage drains at store speed. Passes stop when ctx is done.
// Bad deps are refused here rather than logged every pass.
func Props(ctx context.Context, deps Deps) (*actor.Props, error) {
	d, err := deps.normalized()
	if err != nil {
		return nil, err
	}
	return actor.PropsFromProducer(func() actor.Actor { return &worker{ctx: ctx, deps: d} }), nil
}

func (w *worker) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		w.pass(c)
	case *supervise.Tick:
		if w.ticker.Owns(m) {
			w.pass(c)
		}
	case *actor.Restarting, *actor.Stopping:
		w.ticker.Cancel()
	}
}

func (w *worker) pass(c actor.Context) {
	if w.ctx.Err() != nil {
		return
	}
	res, err := RunOnce(w.ctx, w.deps)
	if err != nil {
		w.deps.Logger.Warn("gift reconciler pass failed; retrying next pass", "worker", WorkerName,
			"error", supervise.ErrorText(err), "confirmed", res.Confirmed, "refunded", res.Refunded, "failed", res.Failed)
	}
	delay := w.deps.Interval
	if err == nil && res.Confirmed+res.Refunded >= w.deps.BatchSize {
		delay = 0
	}
	w.ticker.Schedule(c, delay)
}

// Worker is a running reconciler.
type Worker struct {
	system *actor.ActorSystem
	pid    *actor.PID
	stop   context.CancelFunc
}

// Start spawns the reconciler under sup.
func Start(sup *supervise.Supervisor, deps Deps) (*Worker, error) {
	ctx, cancel := context.WithCancel(context.Background())
	props, err := Props(ctx, deps)
	if err != nil {
		cancel()
		return nil, err
	}
	pid, err := sup.Spawn(WorkerName, props)
	if err != nil {
		cancel()
		return nil, err
	}
	return &Worker{system: sup.System(), pid: pid, stop: cancel}, nil
}

// Stop ends the passes (the running one stops between reservations) and
// waits for the actor to stop.
func (w *Worker) Stop(timeout time.Duration) error {
	w.stop()
	return supervise.StopAndWait(w.system, w.pid, timeout)
}
