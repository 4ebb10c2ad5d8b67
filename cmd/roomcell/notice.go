package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/notice/noticeapp"
	"github.com/hyapp/roomcell/actors/notice/roomnotice"
	"github.com/hyapp/roomcell/actors/notice/walletnotice"
	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/persistence"
)

// noticeParts is the notice role (seed 003) of this process.
type noticeParts struct {
	store   persistence.NoticeStore
	wallet  walletnotice.Source
	room    roomnotice.Source
	service *noticeapp.Service
}

// roomPublisher is what room grains and the relay publish through: the IM
// publisher. With notice.mq.room_outbox on it also connects the room_outbox
// topic for the MQ fanout worker (started with the relay role), and every
// event a room hands over kicks that worker, so the topic gets it at once
// without waiting for a poll. The two channels keep their own progress
// per row (issue 11): an MQ outage never re-sends IM messages and an IM
// outage never holds the topic back.
func (a *App) roomPublisher(ctx context.Context, im *roomim.Publisher) (room.Publisher, error) {
	mqCfg := a.cfg.Notice.MQ
	if !mqCfg.RoomOutboxOn() {
		return im, nil
	}
	js, err := mq.DialJetStream(ctx, mqCfg, mq.WithLogger(a.log.With("component", "mq")))
	if err != nil {
		return nil, fmt.Errorf("notice.mq: %w", err)
	}
	a.jetstream = js
	a.closers = append(a.closers, js.Close)
	return relay.WithMQKick(im, func() {
		if f := a.mqFanout.Load(); f != nil {
			f.Kick()
		}
	}), nil
}

// openNotice picks up the notice delivery table and the owner outboxes it
// reads, which backend.Open opened when this process runs the notice role.
// On MySQL it reads wallet_outbox and room_outbox of the configured
// databases; on go-memdb only this process's own wallet and rooms.
func (a *App) openNotice() error {
	if a.stores.Notice == nil {
		return nil
	}
	a.notices = noticeParts{store: a.stores.Notice, wallet: a.stores.WalletOutbox, room: a.stores.RoomOutbox}
	if a.notices.wallet == nil && a.cfg.Notice.WalletNoticeWorker.Enabled {
		return fmt.Errorf("notice.wallet_notice_worker: on go-memdb the wallet must run in this process (wallet.addr is set)")
	}
	return nil
}

// noticeModules lists the notice role's sources, one module package each:
// a new source is its package plus one line here.
func (a *App) noticeModules() []noticeapp.Module {
	return []noticeapp.Module{
		walletnotice.App(a.notices.wallet),
		roomnotice.App(a.notices.room),
	}
}

// startNotice starts the notice workers and the MQ consumer under sup.
func (a *App) startNotice(sup *supervise.Supervisor, im *roomim.Publisher) error {
	if a.notices.store == nil {
		return nil
	}
	metrics, err := notice.NewMetrics(a.registry)
	if err != nil {
		return err
	}
	var sub mq.Subscriber
	if a.jetstream != nil {
		sub = a.jetstream
	}
	svc, err := noticeapp.Start(sup, noticeapp.Deps{
		Config: a.cfg.Notice, Store: a.notices.store, Modules: a.noticeModules(),
		Publisher: im, MQ: sub, NodeID: a.cfg.NodeID, Logger: a.log, Metrics: metrics,
	})
	if err != nil {
		return err
	}
	a.notices.service = svc
	a.workers = append(a.workers, worker{name: "notice", stop: func() {
		if err := svc.Stop(10 * time.Second); err != nil {
			a.log.Warn("notice stop", "error", err)
		}
	}})
	a.began("worker notice")
	return nil
}
