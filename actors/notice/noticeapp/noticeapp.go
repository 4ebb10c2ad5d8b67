package noticeapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/notice/roomnotice"
	"github.com/hyapp/roomcell/actors/notice/walletnotice"
	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/persistence"
)

// Deps is what the notice role needs, opened by the process.
type Deps struct {
	Config configs.NoticeConfig
	// Store is the delivery table: memdb.NewNoticeStore() or
	// mysql.OpenNoticeStore.
	Store persistence.NoticeStore
	// WalletSource reads wallet_outbox: the in-process wallet's store
	// (memdb.WalletStore, mysql.WalletStore) or
	// mysql.NoticeStore.WalletOutbox(). Required when the wallet worker
	// is enabled.
	WalletSource walletnotice.Source
	// RoomSource reads room_outbox: memdb.Store or
	// mysql.NoticeStore.RoomOutbox(). Required when the room worker is
	// enabled.
	RoomSource roomnotice.Source
	// Publisher sends the C2C notices: *roomim.Publisher.
	Publisher notice.Publisher
	// MQ subscribes the room_outbox consumer group; required when
	// notice.mq.room_outbox is on (mq.DialJetStream).
	MQ      mq.Subscriber
	NodeID  string
	Logger  *slog.Logger
	Metrics *notice.Metrics // notice.NewMetrics(registry); nil: none
	// Settle overrides the scanners' late-commit windows (tests); 0 =
	// the modules' defaults.
	Settle time.Duration
}

// Service is the running notice role: its worker actors and its MQ
// consumer.
type Service struct {
	log      *slog.Logger
	workers  map[string]*notice.Running // by source
	consumer mq.Consumer
	stopOnce sync.Once
	stopErr  error
}

// Start spawns the enabled workers as children of sup (restarted on a
// panic by sup's strategy) and subscribes the MQ consumer:
//   - notice.wallet_notice_worker.enabled: worker "wallet_notice_worker"
//     scanning wallet_outbox and delivering its rows;
//   - notice.room_notice_worker.enabled: worker "room_notice_worker"
//     scanning room_outbox for RoomUserKicked and delivering;
//   - notice.mq.enabled and mq.room_outbox.enabled: the consumer group
//     ingests RoomUserKicked messages and kicks the room worker, which
//     then runs (delivery and retries only) even when its scan is off.
//
// Nothing enabled: a Service with nothing running. Stop it before the
// store and the publisher close.
func Start(sup *supervise.Supervisor, d Deps) (*Service, error) {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	cfg := d.Config
	s := &Service{log: d.Logger.With("component", "notice"), workers: map[string]*notice.Running{}}
	base := notice.Deps{Store: d.Store, Publisher: d.Publisher, NodeID: d.NodeID, Logger: d.Logger, Metrics: d.Metrics}
	fail := func(err error) (*Service, error) {
		_ = s.Stop(10 * time.Second)
		return nil, err
	}
	if cfg.WalletNoticeWorker.Enabled {
		if d.WalletSource == nil {
			return fail(errors.New("notice: wallet_notice_worker is enabled but there is no wallet_outbox source"))
		}
		var opts []walletnotice.Option
		if d.Settle > 0 {
			opts = append(opts, walletnotice.WithSettle(d.Settle))
		}
		wd := base
		wd.Config = cfg.WalletNoticeWorker
		wd.Module = walletnotice.Module(d.WalletSource, append(opts, walletnotice.WithLogger(d.Logger))...)
		r, err := notice.Start(sup, wd)
		if err != nil {
			return fail(fmt.Errorf("notice: start %s: %w", walletnotice.WorkerName, err))
		}
		s.workers[persistence.SourceWalletOutbox] = r
	}
	mqOn := cfg.MQ.RoomOutboxOn()
	if cfg.RoomNoticeWorker.Enabled || mqOn {
		var src roomnotice.Source
		if cfg.RoomNoticeWorker.Enabled {
			if d.RoomSource == nil {
				return fail(errors.New("notice: room_notice_worker is enabled but there is no room_outbox source"))
			}
			src = d.RoomSource
		}
		var opts []roomnotice.Option
		if d.Settle > 0 {
			opts = append(opts, roomnotice.WithSettle(d.Settle))
		}
		rd := base
		rd.Config = cfg.RoomNoticeWorker
		rd.Module = roomnotice.Module(src, opts...)
		r, err := notice.Start(sup, rd)
		if err != nil {
			return fail(fmt.Errorf("notice: start %s: %w", roomnotice.WorkerName, err))
		}
		s.workers[persistence.SourceRoomOutbox] = r
	}
	if mqOn {
		if d.MQ == nil {
			return fail(errors.New("notice: mq.room_outbox is enabled but there is no MQ subscriber"))
		}
		roomWorker := s.workers[persistence.SourceRoomOutbox]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := d.MQ.Subscribe(ctx, mq.Subscription{
			Topic: cfg.MQ.RoomOutbox.Topic, Group: cfg.MQ.RoomOutbox.ConsumerGroup,
			Tags: []string{room.TypeRoomUserKicked}, MaxRedeliver: cfg.MQ.RoomOutbox.MaxRedeliver,
			Handler: RoomOutboxHandler(d.Store, roomWorker.Kick, d.Metrics),
		})
		cancel()
		if err != nil {
			return fail(err)
		}
		s.consumer = c
	}
	names := make([]string, 0, len(s.workers))
	for src := range s.workers {
		names = append(names, src)
	}
	s.log.Info("notice role started", "sources", names, "mq_room_outbox", mqOn,
		"room_scan", cfg.RoomNoticeWorker.Enabled, "wallet_scan", cfg.WalletNoticeWorker.Enabled)
	return s, nil
}

// RoomOutboxHandler is the notice consumer group's handler: ingest the
// kick's notice (ingress mq) and ask the room worker to deliver it now. A
// message that cannot be decoded is dropped; a store error has it
// redelivered.
func RoomOutboxHandler(store persistence.NoticeStore, kick func(), m *notice.Metrics) mq.Handler {
	return func(ctx context.Context, msg mq.Message) error {
		n, err := roomnotice.IngestEnvelope(ctx, store, msg.Data, time.Now().UnixMilli())
		if errors.Is(err, notice.ErrCorruptSource) {
			return fmt.Errorf("%w: %v", mq.ErrDrop, err)
		}
		if err != nil {
			return err
		}
		if n > 0 {
			if m != nil {
				m.Ingested.WithLabelValues(persistence.SourceRoomOutbox, persistence.IngressMQ).Add(float64(n))
			}
			if kick != nil {
				kick()
			}
		}
		return nil
	}
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

// Stop stops the MQ consumer first (no new ingests), then each worker:
// sends in flight finish with their marks, claimed rows not started are
// released. Each step waits at most timeout. Call it before the store and
// the publisher close.
func (s *Service) Stop(timeout time.Duration) error {
	if s == nil {
		return nil
	}
	s.stopOnce.Do(func() {
		var errs []error
		if s.consumer != nil {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			errs = append(errs, s.consumer.Stop(ctx))
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
