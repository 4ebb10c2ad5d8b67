package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
)

// RunNowResult is what Relay.RunNow returns: the batch's counts and error.
type RunNowResult struct {
	Result Result
	Err    error
}

// round is one relay batch as a supervise.Round for one incarnation of the
// actor (its own lease owner: rows a crashed incarnation held come back
// only when their lease expires). The claim limit is the incarnation's
// state: batch_size, grown while a room has a backlog (nextLimit).
func round(deps Deps) supervise.Round {
	deps.Owner = supervise.LeaseOwner(deps.NodeID)
	limit := deps.Config.BatchSize
	return func(ctx context.Context) (time.Duration, any) {
		res, err := processBatch(ctx, deps, limit)
		if err != nil {
			deps.Logger.Error("outbox batch failed: retrying next poll", slog.String("worker", WorkerName),
				slog.String("node_id", deps.NodeID), slog.String("error", supervise.ErrorText(err)))
		}
		limit = nextLimit(deps.Config, res, err)
		return nextDelay(deps, res, err), &RunNowResult{Result: res, Err: err}
	}
}

// full: the batch claimed all it asked for and none of it failed.
func full(last Result, err error) bool {
	return err == nil && last.Published+last.NoOp+last.Parked >= last.Limit && last.Failed+last.StoreErrors == 0
}

// nextDelay: at once after a full batch, so a backlog drains at IM speed
// instead of one claim per poll; otherwise poll_interval. Failures always
// wait for the poll: an IM outage must not turn into a tight retry loop.
func nextDelay(deps Deps, last Result, err error) time.Duration {
	if full(last, err) {
		return 0
	}
	return deps.Config.PollInterval
}

// nextLimit is the hot-room rule (issue 13): after a full batch that one
// room filled at least half of, that room has a backlog, and the next
// claim doubles, up to hot_room_batch, so a hot room's backlog costs
// fewer claims (each claim reads the room's pending rows to check its
// owner) and its coalesced messages fill up. Anything else, a failure
// above all, goes back to batch_size.
func nextLimit(cfg configs.OutboxWorkerConfig, last Result, err error) int {
	if full(last, err) && 2*last.HotRoomRows >= last.Limit {
		return min(2*last.Limit, cfg.HotRoomBatch)
	}
	return cfg.BatchSize
}

// Relay is a running relay actor.
type Relay struct {
	p *supervise.Poller
}

// Start validates deps (an unknown outbox_worker.retry_strategy is an
// error naming the key) and spawns the relay as the child "room_outbox" of
// sup, on the shared poller shell: one batch at once, then one per tick
// (the next tick is scheduled after a batch ends, so a slow batch delays
// the next one instead of queueing ticks), restarted by sup's policy after
// a panic. It does not look at Config.Enabled: the caller decides whether
// to start it.
func Start(sup *supervise.Supervisor, deps Deps) (*Relay, error) {
	d, err := deps.normalized()
	if err != nil {
		return nil, err
	}
	p, err := supervise.StartPoller(sup, supervise.PollerSpec{
		Name: WorkerName,
		New:  func() supervise.Round { return round(d) },
	})
	if err != nil {
		return nil, err
	}
	return &Relay{p: p}, nil
}

// Poller is the relay's actor shell (PID, Running).
func (r *Relay) Poller() *supervise.Poller { return r.p }

// Kick asks for a batch now without waiting for it. It is the hook the
// OutboxAdmin "retry" RPC calls.
func (r *Relay) Kick() { r.p.Kick() }

// RunNow runs a batch now and returns its result.
func (r *Relay) RunNow(timeout time.Duration) (RunNowResult, error) {
	res, err := r.p.RunNow(timeout)
	if err != nil {
		return RunNowResult{}, err
	}
	if res == nil {
		return RunNowResult{}, supervise.ErrStopped
	}
	return *res.(*RunNowResult), nil
}

// Stop is the relay's part of the seed's shutdown: no new batch starts; the
// event being published gets the rest of its publish_timeout and its
// published/failed mark; rows claimed but not started are released; then
// the actor stops. It waits at most timeout (publish_timeout plus a few
// seconds for the store is enough) and must run before the store closes.
func (r *Relay) Stop(timeout time.Duration) error { return r.p.Stop(timeout) }
