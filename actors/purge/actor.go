package purge

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/supervise"
)

type purgeActor struct {
	// ctx is cancelled by Worker.Stop: the running round stops at its next
	// batch or pause.
	ctx    context.Context
	svc    *Service
	ticker supervise.Ticker
}

func (a *purgeActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.next(c, a.svc.Round(a.ctx))
	case *supervise.Tick:
		if !a.ticker.Owns(m) {
			return // sent to an earlier incarnation
		}
		a.next(c, a.svc.Round(a.ctx))
	case *actor.Restarting, *actor.Stopping:
		// Both: a timer left running across a restart would add a second
		// chain of rounds per restart.
		a.ticker.Cancel()
	}
}

// next schedules the next round: after retention.interval, or after one
// batch pause when a table still had eligible rows (a backlog drains at
// the configured rate rather than one interval's worth per interval).
func (a *purgeActor) next(c actor.Context, last []TableRound) {
	if a.ctx.Err() != nil {
		return
	}
	delay := a.svc.deps.Config.Interval
	for _, tr := range last {
		if !tr.Done && tr.Err == nil && tr.Skipped == "" {
			delay = a.svc.deps.Config.BatchPause
		}
	}
	a.ticker.Schedule(c, delay)
}

// Worker is a running purge actor.
type Worker struct {
	Service *Service
	system  *actor.ActorSystem
	pid     *actor.PID
	stop    context.CancelFunc
}

// Start validates deps and spawns the purge actor as the child
// WorkerName of sup; the first round runs at once. It does not look at
// Config.Enabled: the caller decides whether to start it.
func Start(sup *supervise.Supervisor, deps Deps) (*Worker, error) {
	svc, err := NewService(deps)
	if err != nil {
		return nil, err
	}
	return Run(sup, svc)
}

// Run spawns the purge actor of an existing Service (whose Status the
// operators' RPC also reads).
func Run(sup *supervise.Supervisor, svc *Service) (*Worker, error) {
	ctx, cancel := context.WithCancel(context.Background())
	pid, err := sup.Spawn(WorkerName, actor.PropsFromProducer(func() actor.Actor {
		return &purgeActor{ctx: ctx, svc: svc}
	}))
	if err != nil {
		cancel()
		return nil, err
	}
	return &Worker{Service: svc, system: sup.System(), pid: pid, stop: cancel}, nil
}

// Stop cancels the running round (it ends at its next batch or pause, and
// releases its lease) and waits at most timeout for the actor to stop.
func (w *Worker) Stop(timeout time.Duration) error {
	w.stop()
	return supervise.StopAndWait(w.system, w.pid, timeout)
}
