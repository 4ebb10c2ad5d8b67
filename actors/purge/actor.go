package purge

import (
	"context"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
)

// round is the poller's round: one purge round, then the wait before the
// next: retention.interval, or one batch pause when a table still had
// eligible rows (a backlog drains at the configured rate rather than one
// interval's worth per interval).
func (s *Service) round(ctx context.Context) (time.Duration, any) {
	last := s.Round(ctx)
	delay := s.deps.Config.Interval
	for _, tr := range last {
		if !tr.Done && tr.Err == nil && tr.Skipped == "" {
			delay = s.deps.Config.BatchPause
		}
	}
	return delay, last
}

// Worker is a running purge worker.
type Worker struct {
	Service *Service
	p       *supervise.Poller
}

// Start validates deps and starts the purge worker as the poller
// WorkerName under sup; the first round runs at once. It does not look at
// Config.Enabled: the caller decides whether to start it.
func Start(sup *supervise.Supervisor, deps Deps) (*Worker, error) {
	svc, err := NewService(deps)
	if err != nil {
		return nil, err
	}
	return Run(sup, svc)
}

// Run starts the purge worker of an existing Service (whose Status the
// operators' RPC also reads) on the poller shell of actors/supervise.
func Run(sup *supervise.Supervisor, svc *Service) (*Worker, error) {
	p, err := supervise.StartPoller(sup, supervise.PollerSpec{
		Name: WorkerName,
		New:  func() supervise.Round { return svc.round },
	})
	if err != nil {
		return nil, err
	}
	return &Worker{Service: svc, p: p}, nil
}

// Stop cancels the running round (it ends at its next batch or pause, and
// releases its lease) and waits at most timeout for the worker to stop.
func (w *Worker) Stop(timeout time.Duration) error { return w.p.Stop(timeout) }
