package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/grpcapi"
	v1 "github.com/hyapp/roomcell/grpcapi/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

func openStore(ctx context.Context, cfg configs.Config, log *slog.Logger) (persistence.Store, error) {
	switch cfg.Store.Kind {
	case configs.StoreMemdb:
		return memdb.New(), nil
	}
	return nil, fmt.Errorf("store.kind %q: not available in this build", cfg.Store.Kind)
}

// openPublisher builds the IM path: the real Tencent IM client when
// tencent_im.enabled, otherwise the same client pointed at an in-process
// fake Tencent IM on loopback (dev mode: its messages are logged and listed
// at its /debug/messages page).
func (a *App) openPublisher(ctx context.Context, dev bool) (*roomim.Publisher, error) {
	imLog := a.log.With("component", "im")
	imCfg := a.cfg.TencentIM
	if !imCfg.Enabled {
		fake, fakeCfg, err := imfake.StartDev(imLog.With("fake", true))
		if err != nil {
			return nil, fmt.Errorf("fake tencent im: %w", err)
		}
		a.fakeIM = fake
		a.closers = append(a.closers, func() { _ = fake.Close() })
		imCfg = fakeCfg
		a.log.Info("fake Tencent IM serving", "url", fake.URL(), "messages", fake.URL()+"/debug/messages")
	}
	client, err := tencentim.New(imCfg, tencentim.WithLogger(imLog))
	if err != nil {
		return nil, err
	}
	pub := roomim.New(client, roomim.WithLogger(imLog))
	a.closers = append(a.closers, pub.Close)
	return pub, nil
}

// catalogGifts prices gifts from the catalog without charging anyone.
// Interim until the wallet is wired.
type catalogGifts map[string]configs.GiftConfig

func (c catalogGifts) DebitGift(_ context.Context, d room.GiftDebit) (int64, error) {
	g, ok := c[d.GiftID]
	if !ok {
		return 0, fmt.Errorf("%w: unknown gift_id %q", room.ErrInvalid, d.GiftID)
	}
	return g.Heat * d.Count, nil
}

func (a *App) openWallet(ctx context.Context) (room.GiftDebiter, error) {
	c := catalogGifts{}
	for _, g := range a.cfg.Gifts {
		c[g.ID] = g
	}
	return c, nil
}

// startWorkers spawns the supervised background actors of the roles this
// process runs. Each registers its stop in a.workers; Shutdown stops them
// before gRPC and the store.
func (a *App) startWorkers(pub relay.Publisher) error {
	sys := a.member.System
	unsubscribe := supervise.LogEvents(sys, a.log.With("component", "supervisor"))
	a.workers = append(a.workers, worker{name: "supervisor-log", stop: unsubscribe})
	sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		return err
	}
	a.workers = append(a.workers, worker{name: "workers", stop: func() { _ = sup.Stop(5 * time.Second) }})
	if a.cfg.HasRole(configs.RoleRelay) && a.cfg.OutboxWorker.On() {
		metrics, err := relay.NewMetrics(a.registry)
		if err != nil {
			return err
		}
		r, err := relay.Start(sup, relay.Deps{
			Store: a.store, Publisher: pub, Config: a.cfg.OutboxWorker, NodeID: a.cfg.NodeID,
			Logger: a.log.With("component", "relay"), Metrics: metrics,
		})
		if err != nil {
			return err
		}
		a.relay = r
		timeout := a.cfg.OutboxWorker.PublishTimeout + 5*time.Second
		a.workers = append(a.workers, worker{name: "room_outbox", stop: func() {
			if err := r.Stop(timeout); err != nil {
				a.log.Warn("relay stop", "error", err)
			}
		}})
	}
	return nil
}

// registerServices registers the gRPC services besides RoomService.
func (a *App) registerServices() {
	log := a.log.With("component", "grpc")
	v1.RegisterOutboxAdminServer(a.grpcServer, grpcapi.NewOutboxAdminServer(a.store, func(id string) bool {
		if a.relay == nil {
			return false
		}
		a.relay.RunNow(id)
		return true
	}, log))
}

func migrate(ctx context.Context, cfg configs.Config, log *slog.Logger) error {
	return errors.New("migrate: not available in this build")
}
