package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery"

	"github.com/hyapp/roomcell/actors/notice/noticeapp"
	"github.com/hyapp/roomcell/actors/notice/roomnotice"
	"github.com/hyapp/roomcell/actors/notice/walletnotice"
	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/mq/rocketmq"
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
// per row: an MQ outage never re-sends IM messages and an IM
// outage never holds the topic back.
func (a *App) roomPublisher(ctx context.Context, im *roomim.Publisher) (delivery.Publisher, error) {
	mqCfg := a.cfg.Notice.MQ
	if !mqCfg.RoomOutboxOn() {
		return im, nil
	}
	c, err := dialMQ(ctx, mqCfg, a.log) // the MQ clients name their component
	if err != nil {
		return nil, fmt.Errorf("notice.mq: %w", err)
	}
	a.mq = c
	a.closers = append(a.closers, c.Close)
	return relay.WithMQKick(im, a.kickMQFanouts), nil
}

// mqClient is the room_outbox topic's client: JetStream or RocketMQ.
type mqClient interface {
	mq.Publisher
	mq.Subscriber
	Close()
}

// dialMQ connects the implementation notice.mq.kind names.
func dialMQ(ctx context.Context, cfg configs.MQConfig, log *slog.Logger) (mqClient, error) {
	if cfg.Kind == configs.MQKindRocketMQ {
		return rocketmq.Dial(ctx, cfg, rocketmq.WithLogger(log))
	}
	return mq.DialJetStream(ctx, cfg, mq.WithLogger(log))
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
