package notice

import (
	"context"
	"log/slog"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
)

// RoundResult is a round's outcome, what the worker's RunNow returns: its
// counts and error.
type RoundResult struct {
	Result Result
	Err    error
}

// round is one incarnation's round for the shared poller shell. One lease
// owner per incarnation: rows a crashed incarnation held come back only
// when their lease expires; the scanner restarts from the stored cursor
// too (a new Worker has not held it).
func round(deps Deps) supervise.Round[RoundResult] {
	d := deps
	d.Owner = supervise.LeaseOwner(d.NodeID)
	w, err := NewWorker(d)
	if err != nil {
		// Start validated deps; a failure here is a bug.
		panic(err)
	}
	return func(ctx context.Context) (time.Duration, RoundResult) {
		res, err := w.Round(ctx)
		if err != nil {
			d.Logger.Error("notice round failed: retrying next poll", slog.String("worker", d.Module.Name),
				slog.String("error", supervise.ErrorText(err)))
		}
		return nextDelay(d, res, err), RoundResult{Result: res, Err: err}
	}
}

// nextDelay: at once when this round scanned or claimed a full batch
// without a failure, so a backlog drains at IM speed instead of batch_size
// per poll; failures always wait for the poll, so an IM outage does not
// become a tight loop.
func nextDelay(d Deps, r Result, err error) time.Duration {
	clean := err == nil && r.Retryable+r.Failed+r.StoreErrors == 0
	if clean && (r.ScanMore || r.Claimed >= d.Config.BatchSize) {
		return 0
	}
	return d.Config.PollInterval
}

// Start validates deps and spawns the worker as the child deps.Module.Name
// of sup on the shared poller shell (actors/supervise): a round at once,
// then one per tick, the next tick scheduled after a round ends; under a
// worker Supervisor it is restarted after any number of panics with
// backoff, counted in roomcell_worker_restarts_total{worker} and listed on
// /readyz while it waits. It does not look at Config.Enabled: the caller
// decides. Kick on the poller asks for a round now (the MQ consumer after
// an ingest, an operator's requeue; kicks while one is queued are
// dropped). Its Stop: no new round starts; sends in flight get the rest of
// send_timeout and their marks; claimed rows not started are released
// (wait send_timeout plus a few seconds, before the store closes).
func Start(sup *supervise.Supervisor, deps Deps) (*supervise.Poller[RoundResult], error) {
	d, err := deps.checked()
	if err != nil {
		return nil, err
	}
	return supervise.StartPoller(sup, supervise.PollerSpec[RoundResult]{Name: d.Module.Name, New: func() supervise.Round[RoundResult] { return round(d) }})
}
