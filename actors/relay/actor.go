package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/supervise"
)

// RunNow asks the relay for a batch right away (operator retry). Rows in
// Force are attempted even if the exponential strategy would still wait.
// Sent with Request, the relay answers *RunNowResult; the poll timer is left
// as it is.
type RunNow struct {
	Force []string
}

// RunNowResult answers a RunNow request.
type RunNowResult struct {
	Result Result
	Err    error
}

type relayActor struct {
	// ctx is cancelled by Relay.Stop: no batch starts after that and the
	// running one stops between rows.
	ctx    context.Context
	deps   Deps
	ticker supervise.Ticker
}

// Props is the relay actor: on Started one batch at once, then one batch
// per poll_interval tick (the next tick is scheduled after a batch ends, so
// a slow batch delays the next one instead of queueing ticks). A batch runs
// inside Receive, so a poison pill waits for it: without Relay.Stop's
// cancel that is up to batch_size × publish_timeout. Prefer Start.
func Props(deps Deps) *actor.Props {
	return props(context.Background(), deps)
}

func props(ctx context.Context, deps Deps) *actor.Props {
	if d, err := deps.normalized(); err == nil {
		deps = d
	} else {
		// Every batch reports the error; poll at the default meanwhile.
		deps.Config.PollInterval = max(deps.Config.PollInterval, time.Second)
	}
	return actor.PropsFromProducer(func() actor.Actor {
		d := deps
		// One lease owner per incarnation: rows a crashed incarnation held
		// come back only when their lease expires.
		d.Owner = supervise.LeaseOwner(d.NodeID)
		return &relayActor{ctx: ctx, deps: d}
	})
}

func (a *relayActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.next(c, a.batch())
	case *supervise.Tick:
		if !a.ticker.Owns(m) {
			return // sent to an earlier incarnation
		}
		a.next(c, a.batch())
	case *RunNow:
		res, err := a.run(m.Force...)
		if c.Sender() != nil {
			c.Respond(&RunNowResult{Result: res, Err: err})
		}
	case *actor.Restarting, *actor.Stopping:
		// Both: a timer left running across a restart would add a second
		// tick chain per restart.
		a.ticker.Cancel()
	}
}

func (a *relayActor) batch(force ...string) Result {
	res, _ := a.run(force...)
	return res
}

func (a *relayActor) run(force ...string) (Result, error) {
	if a.ctx.Err() != nil {
		return Result{}, nil
	}
	res, err := ProcessBatch(a.ctx, a.deps, force...)
	if err != nil {
		logger := a.deps.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Error("outbox batch failed: retrying next poll", slog.String("worker", WorkerName),
			slog.String("node_id", a.deps.NodeID), slog.String("error", supervise.ErrorText(err)))
	}
	return res, err
}

// next schedules the next batch: after poll_interval, or at once when this
// batch published a full batch_size without a failure, so a backlog drains
// at IM speed instead of batch_size per poll. Failures always wait for the
// poll: an IM outage must not turn into a tight retry loop.
func (a *relayActor) next(c actor.Context, last Result) {
	if a.ctx.Err() != nil {
		return
	}
	delay := a.deps.Config.PollInterval
	if last.Published+last.NoOp >= a.deps.Config.BatchSize && last.Failed+last.Corrupt+last.StoreErrors == 0 {
		delay = 0
	}
	a.ticker.Schedule(c, delay)
}

// Relay is a running relay actor.
type Relay struct {
	system *actor.ActorSystem
	pid    *actor.PID
	stop   context.CancelFunc
}

// Start validates deps (an unknown outbox_worker.retry_strategy is an
// error naming the key) and spawns the relay as the child "room_outbox" of
// sup. It does not look at Config.Enabled: the caller decides whether to
// start it.
func Start(sup *supervise.Supervisor, deps Deps) (*Relay, error) {
	d, err := deps.normalized()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	pid, err := sup.Spawn(WorkerName, props(ctx, d))
	if err != nil {
		cancel()
		return nil, err
	}
	return &Relay{system: sup.System(), pid: pid, stop: cancel}, nil
}

// PID is the relay actor's PID.
func (r *Relay) PID() *actor.PID { return r.pid }

// RunNow asks for a batch now without waiting for it; force as in RunNow.
// It is the hook the OutboxAdmin "retry" RPC calls.
func (r *Relay) RunNow(force ...string) {
	r.system.Root.Send(r.pid, &RunNow{Force: force})
}

// Stop is the relay's part of the seed's shutdown: no new batch starts; the
// event being published gets the rest of its publish_timeout and its
// published/failed mark; rows claimed but not started are released; then
// the actor stops. It waits at most timeout (publish_timeout plus a few
// seconds for the store is enough) and must run before the store closes.
func (r *Relay) Stop(timeout time.Duration) error {
	r.stop()
	return supervise.StopAndWait(r.system, r.pid, timeout)
}
