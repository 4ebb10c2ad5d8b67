package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery"
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

func (a *App) openPublisher(ctx context.Context, dev bool) (room.Publisher, error) {
	return delivery.LogPublisher{Logger: a.log.With("component", "im")}, nil
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

func (a *App) startWorkers(pub room.Publisher) error { return nil }

func (a *App) registerServices() {}

func migrate(ctx context.Context, cfg configs.Config, log *slog.Logger) error {
	return errors.New("migrate: not available in this build")
}
