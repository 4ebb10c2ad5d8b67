package giftsettle

import (
	"context"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
)

// Pass is one pass's outcome, what the reconciler's RunNow returns.
type Pass struct {
	Result Result
	Err    error
}

// round is one pass on the shared poller shell. A full batch settled
// without failures runs the next pass at once, so a backlog left by an
// outage drains at store speed; otherwise the next is one PollInterval later.
func round(d Deps) supervise.Round[Pass] {
	return func(ctx context.Context) (time.Duration, Pass) {
		res, err := RunOnce(ctx, d)
		if err != nil {
			d.Logger.Warn("gift reconciler pass failed; retrying next pass", "worker", WorkerName,
				"error", supervise.ErrorText(err), "confirmed", res.Confirmed, "refunded", res.Refunded, "failed", res.Failed)
		}
		delay := d.Config.PollInterval
		if err == nil && res.Confirmed+res.Refunded >= d.Config.BatchSize {
			delay = 0
		}
		return delay, Pass{Result: res, Err: err}
	}
}

// Start validates deps (refused here rather than logged every pass) and
// spawns the reconciler as the child WorkerName of sup on the shared
// poller shell (actors/supervise): a pass at once, then one per PollInterval
// (scheduled after a pass ends, so passes never overlap or queue),
// restarted after a panic by sup's policy (a metric and a log line while
// it waits, not an unready node). Stop on the poller ends the passes (the running one stops
// between reservations) and waits for the actor to stop.
func Start(sup *supervise.Supervisor, deps Deps) (*supervise.Poller[Pass], error) {
	d, err := deps.checked()
	if err != nil {
		return nil, err
	}
	return supervise.StartPoller(sup, supervise.PollerSpec[Pass]{Name: WorkerName, New: func() supervise.Round[Pass] { return round(d) }})
}
