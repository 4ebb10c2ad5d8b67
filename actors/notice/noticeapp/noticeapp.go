package noticeapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/persistence"
)

// Deps is what the notice role needs, opened by the process, and the
// notice modules it runs.
type Deps struct {
	Config configs.NoticeConfig
	// Store is the delivery table: memdb.NewNoticeStore() or
	// mysql.OpenNoticeStore.
	Store persistence.NoticeStore
	// Modules are the notice sources, one per module package
	// (walletnotice.App, roomnotice.App, ...), started in this order. A
	// module closes over its own owner-outbox reader.
	Modules []Module
	// Publisher sends the C2C notices: *roomim.Publisher.
	Publisher notice.Publisher
	// MQ subscribes the consumer groups modules ask for; required when one
	// does (notice.mq.room_outbox on: mq.DialJetStream).
	MQ      mq.Subscriber
	NodeID  string
	Logger  *slog.Logger
	Metrics *notice.Metrics // notice.NewMetrics(registry); nil: none
	// Settle overrides the scanners' late-commit windows (tests); 0 =
	// the modules' defaults.
	Settle time.Duration
}

// A Module is one notice source as the role runs it: given the role's
// deps it says whether and how its worker runs in this process. A module
// package exports a constructor of one (walletnotice.App(src)); adding a
// source is that package plus its line in Deps.Modules.
type Module func(d Deps) (Plan, error)

// Plan is how one module's worker runs here.
type Plan struct {
	// Run is false when the module is off in this process.
	Run bool
	// Worker names the worker and its source; its Scanner is nil when
	// this process only delivers rows another path ingested.
	Worker notice.Module
	// Config is the worker's settings (notice.<worker name>).
	Config configs.NoticeWorkerConfig
	// Subscription, when set, is an MQ consumer group that ingests this
	// source's rows and kicks the worker (given as kick) to deliver them.
	Subscription func(kick func()) mq.Subscription
}

// Service is the running notice role: its worker actors and its MQ
// consumers.
type Service struct {
	log       *slog.Logger
	workers   map[string]*supervise.Poller[notice.RoundResult] // by source
	consumers []mq.Consumer
	stopOnce  sync.Once
	stopErr   error
}

// Start asks every module for its plan, spawns the workers that run as
// children of sup (restarted on a panic by sup's strategy) in the order of
// d.Modules, then subscribes the consumer groups the modules ask for. A
// module that cannot run as configured (a scan enabled without its
// source) fails Start. Nothing to run: a Service with nothing running.
// Stop it before the store and the publisher close.
func Start(sup *supervise.Supervisor, d Deps) (*Service, error) {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	s := &Service{log: d.Logger.With("component", "notice"), workers: map[string]*supervise.Poller[notice.RoundResult]{}}
	base := notice.Deps{Store: d.Store, Publisher: d.Publisher, NodeID: d.NodeID, Logger: d.Logger, Metrics: d.Metrics}
	fail := func(err error) (*Service, error) {
		_ = s.Stop(10 * time.Second)
		return nil, err
	}
	type subscription struct {
		worker *supervise.Poller[notice.RoundResult]
		sub    func(kick func()) mq.Subscription
	}
	var subs []subscription
	var scanning []string
	for _, m := range d.Modules {
		p, err := m(d)
		if err != nil {
			return fail(err)
		}
		if !p.Run {
			continue
		}
		if _, dup := s.workers[p.Worker.Source]; dup {
			return fail(fmt.Errorf("notice: two modules deliver source %s", p.Worker.Source))
		}
		wd := base
		wd.Config, wd.Module = p.Config, p.Worker
		r, err := notice.Start(sup, wd)
		if err != nil {
			return fail(fmt.Errorf("notice: start %s: %w", p.Worker.Name, err))
		}
		s.workers[p.Worker.Source] = r
		if p.Worker.Scanner != nil {
			scanning = append(scanning, p.Worker.Source)
		}
		if p.Subscription != nil {
			subs = append(subs, subscription{r, p.Subscription})
		}
	}
	for _, sb := range subs {
		if d.MQ == nil {
			return fail(errors.New("notice: a module subscribes to the MQ (mq.room_outbox is enabled) but there is no MQ subscriber"))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := d.MQ.Subscribe(ctx, sb.sub(sb.worker.Kick))
		cancel()
		if err != nil {
			return fail(err)
		}
		s.consumers = append(s.consumers, c)
	}
	names := make([]string, 0, len(s.workers))
	for src := range s.workers {
		names = append(names, src)
	}
	slices.Sort(names)
	s.log.Info("notice role started", "sources", names, "scanning", scanning, "mq_consumers", len(s.consumers))
	return s, nil
}

// Kick asks the worker of source for a round now (after an operator's
// requeue); false when this process runs no such worker.
func (s *Service) Kick(source string) bool {
	if s == nil {
		return false
	}
	r, ok := s.workers[source]
	if ok {
		r.Kick()
	}
	return ok
}

// Running reports whether any worker runs.
func (s *Service) Running() bool { return s != nil && len(s.workers) > 0 }

// Stop stops the MQ consumers first (no new ingests), then each worker:
// sends in flight finish with their marks, claimed rows not started are
// released. Each step waits at most timeout. Call it before the store and
// the publisher close.
func (s *Service) Stop(timeout time.Duration) error {
	if s == nil {
		return nil
	}
	s.stopOnce.Do(func() {
		var errs []error
		for _, c := range s.consumers {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			errs = append(errs, c.Stop(ctx))
			cancel()
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for src, r := range s.workers {
			wg.Go(func() {
				if err := r.Stop(timeout); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("notice: stop %s worker: %w", src, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		s.stopErr = errors.Join(errs...)
		if s.stopErr != nil {
			s.log.Warn("notice role stop", "error", s.stopErr)
		}
	})
	return s.stopErr
}
