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
func (s *Service) round(ctx context.Context) (time.Duration, []TableRound) {
	last := s.Round(ctx)
	delay := s.deps.Config.Interval
	for _, tr := range last {
		if !tr.Done && tr.Err == nil && tr.Skipped == "" {
			delay = s.deps.Config.BatchPause
		}
	}
	return delay, last
}

// Start validates deps and starts the purge worker of a new Service (Run).
func Start(sup *supervise.Supervisor, deps Deps) (*supervise.Poller[[]TableRound], error) {
	svc, err := NewService(deps)
	if err != nil {
		return nil, err
	}
	return Run(sup, svc)
}

// Run starts the purge worker of a Service (whose Status the operators'
// RPC also reads) as the poller WorkerName under sup; the first round runs
// at once. It does not look at Config.Enabled: the caller decides. Stop
// on the poller cancels the running round (it ends at its next batch or
// pause, and releases its lease).
func Run(sup *supervise.Supervisor, svc *Service) (*supervise.Poller[[]TableRound], error) {
	return RunAs(sup, svc, WorkerName)
}

// RunAs is Run under another poller name: a process with several room
// databases runs a purge worker per database.
func RunAs(sup *supervise.Supervisor, svc *Service, name string) (*supervise.Poller[[]TableRound], error) {
	return supervise.StartPoller(sup, supervise.PollerSpec[[]TableRound]{
		Name: name,
		New:  func() supervise.Round[[]TableRound] { return svc.round },
	})
}
