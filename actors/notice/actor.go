package notice

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/supervise"
)

// RoundResult is what Running.RunNow returns: the round's counts and error.
type RoundResult struct {
	Result Result
	Err    error
}

// round is one incarnation's round for the shared poller shell. One lease
// owner per incarnation: rows a crashed incarnation held come back only
// when their lease expires; the scanner restarts from the stored cursor
// too (a new Worker has not held it).
func round(deps Deps) supervise.Round {
	d := deps
	d.Owner = supervise.LeaseOwner(d.NodeID)
	w, err := NewWorker(d)
	if err != nil {
		// Start validated deps; a failure here is a bug.
		panic(err)
	}
	return func(ctx context.Context) (time.Duration, any) {
		res, err := w.Round(ctx)
		if err != nil {
			d.Logger.Error("notice round failed: retrying next poll", slog.String("worker", d.Module.Name),
				slog.String("node_id", d.NodeID), slog.String("error", supervise.ErrorText(err)))
		}
		return nextDelay(d, res, err), &RoundResult{Result: res, Err: err}
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

// Running is a started notice worker actor.
type Running struct {
	p *supervise.Poller
}

// Start validates deps and spawns the worker as the child deps.Module.Name
// of sup on the shared poller shell (actors/supervise): a round at once,
// then one per tick, the next tick scheduled after a round ends; under a
// worker Supervisor it is restarted after any number of panics with
// backoff, counted in roomcell_worker_restarts_total{worker} and listed on
// /readyz while it waits. It does not look at Config.Enabled: the caller
// decides.
func Start(sup *supervise.Supervisor, deps Deps) (*Running, error) {
	d, err := deps.normalized()
	if err != nil {
		return nil, err
	}
	p, err := supervise.StartPoller(sup, supervise.PollerSpec{Name: d.Module.Name, New: func() supervise.Round { return round(d) }})
	if err != nil {
		return nil, err
	}
	return &Running{p: p}, nil
}

// PID is the worker actor's PID.
func (r *Running) PID() *actor.PID { return r.p.PID() }

// Poller is the worker's actor shell (Running, RunNow).
func (r *Running) Poller() *supervise.Poller { return r.p }

// Kick asks for a round now (the MQ consumer after an ingest, an
// operator's requeue). Kicks while one is already queued are dropped: one
// round picks up everything due.
func (r *Running) Kick() { r.p.Kick() }

// RunNow runs a round now and returns its result.
func (r *Running) RunNow(timeout time.Duration) (RoundResult, error) {
	res, err := r.p.RunNow(timeout)
	if err != nil {
		return RoundResult{}, err
	}
	if res == nil {
		return RoundResult{}, supervise.ErrStopped
	}
	return *res.(*RoundResult), nil
}

// Stop: no new round starts; sends in flight get the rest of send_timeout
// and their marks; claimed rows not started are released; then the actor
// stops. It waits at most timeout (send_timeout plus a few seconds is
// enough) and must run before the store closes.
func (r *Running) Stop(timeout time.Duration) error { return r.p.Stop(timeout) }
