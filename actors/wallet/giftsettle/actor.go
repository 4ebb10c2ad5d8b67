package giftsettle

import (
	"context"

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
func Props(ctx context.Context, deps Deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &worker{ctx: ctx, deps: deps} })
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
	if err != nil && w.deps.Logger != nil {
		w.deps.Logger.Warn("gift reconciler pass failed; retrying next pass", "worker", WorkerName,
			"error", supervise.ErrorText(err), "confirmed", res.Confirmed, "refunded", res.Refunded, "failed", res.Failed)
	}
	delay := w.deps.Interval
	if err == nil && res.Confirmed+res.Refunded >= w.deps.BatchSize {
		delay = 0
	}
	w.ticker.Schedule(c, delay)
}
