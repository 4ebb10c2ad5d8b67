package relay

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
)

// RunNowResult is a batch's outcome, what the relay's RunNow returns: its
// counts and error.
type RunNowResult struct {
	Result Result
	Err    error
}

// round is one relay batch as a supervise.Round for one incarnation of the
// actor (its own lease owner: rows a crashed incarnation held come back
// only when their lease expires). The claim limit is the incarnation's
// state: batch_size, grown while a room has a backlog (nextLimit).
func round(deps Deps) supervise.Round[RunNowResult] {
	deps.Owner = supervise.LeaseOwner(deps.NodeID)
	limit := deps.Config.BatchSize
	c := &carry{}
	return func(ctx context.Context) (time.Duration, RunNowResult) {
		res, err := processBatch(ctx, deps, limit, c)
		if err != nil {
			deps.Logger.Error("outbox batch failed: retrying next poll", slog.String("worker", WorkerName),
				slog.String("error", supervise.ErrorText(err)))
		}
		limit = nextLimit(deps.Config, res, err)
		return nextDelay(deps, res, err), RunNowResult{Result: res, Err: err}
	}
}

// full: the batch claimed all it asked for and none of it failed.
func full(last Result, err error) bool {
	return err == nil && last.Published+last.NoOp+last.Parked >= last.Limit && last.Failed+last.StoreErrors == 0
}

// nextDelay: at once after a batch that claimed rows and published them
// all, so a backlog drains at IM speed instead of one claim per poll;
// otherwise poll_interval. A batch need not be full to go on: after a
// fault most claims are partial (rooms their publishers hold are left
// out), and a relay that waited a poll after each drained a backlog at
// one partial claim per second. Failures always wait for the poll: an IM
// outage must not turn into a tight retry loop.
func nextDelay(deps Deps, last Result, err error) time.Duration {
	if err == nil && last.Claimed > 0 && last.Failed+last.StoreErrors+last.Unattempted == 0 {
		return 0
	}
	return deps.Config.PollInterval
}

// nextLimit is the hot-room rule: after a full batch that one
// room filled at least half of, that room has a backlog, and the next
// claim doubles, up to hot_room_batch, so a hot room's backlog costs
// fewer claims (each claim reads the room's pending rows to check its
// owner) and its coalesced messages fill up. Anything else, a failure
// above all, goes back to batch_size. A backlog spread over many rooms
// drains through the pipeline (several claims a round) instead: claims of
// 2,000 such rows cost MariaDB more per row than claims of 500 and
// drained no faster (docs/benchmarks.md).
func nextLimit(cfg configs.OutboxWorkerConfig, last Result, err error) int {
	if full(last, err) && 2*last.HotRoomRows >= last.Limit {
		return min(2*last.Limit, cfg.HotRoomBatch)
	}
	return cfg.BatchSize
}

// Start validates deps (an unknown outbox_worker.retry_strategy is an
// error naming the key) and spawns the relay as the child "room_outbox" of
// sup, on the shared poller shell: one batch at once, then one per tick
// (the next tick is scheduled after a batch ends, so a slow batch delays
// the next one instead of queueing ticks), restarted by sup's policy after
// a panic. It does not look at Config.Enabled: the caller decides whether
// to start it. Kick on the poller is the hook of OutboxAdmin's "retry".
// Its Stop is the relay's part of the seed's shutdown: no new batch
// starts; the event being published gets the rest of its publish_timeout
// and its published/failed mark; rows claimed but not started are
// released; then the actor stops (wait publish_timeout plus a few seconds
// for the store, before the store closes).
func Start(sup *supervise.Supervisor, deps Deps) (*supervise.Poller[RunNowResult], error) {
	d, err := deps.checked()
	if err != nil {
		return nil, err
	}
	return supervise.StartPoller(sup, supervise.PollerSpec[RunNowResult]{
		Name: cmp.Or(d.Name, WorkerName),
		New:  func() supervise.Round[RunNowResult] { return round(d) },
	})
}
