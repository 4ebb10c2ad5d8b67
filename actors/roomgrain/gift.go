package roomgrain

import (
	"context"
	"errors"
	"fmt"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// GiftDebit is the wallet charge of a gift, keyed by the gift command's
// command_id so a retried SendGift never charges twice.
type GiftDebit struct {
	AppCode    string
	RoomID     string
	CommandID  string
	FromUserID string
	ToUserID   string
	GiftID     string
	Count      int64
}

// GiftDebiter is the wallet's part of a gift, in two steps around the
// room's append (the design is argued in actors/wallet/doc.go). Its errors
// must wrap one of this package's class sentinels (ErrPrecondition for an
// insufficient balance or a refunded gift, ErrInvalid for an unknown gift,
// ErrExists for a command_id reused with another gift, ErrUnavailable when
// the wallet is down).
type GiftDebiter interface {
	// HoldGift reserves the price from the sender under the command_id
	// (available → frozen) and returns what the gift is worth. Called
	// again with the same request it reserves nothing more and answers as
	// before; for a gift already refunded it answers ErrPrecondition.
	HoldGift(ctx context.Context, d GiftDebit) (GiftCharge, error)
	// ConfirmGift spends the reservation of a gift the room logged and
	// credits the receiver. Idempotent.
	ConfirmGift(ctx context.Context, appCode, commandID string) error
	// RefundGift returns the reservation of a gift the room voided to the
	// sender. Idempotent.
	RefundGift(ctx context.Context, appCode, commandID string) error
}

// GiftCharge is what a held gift is worth: the room's heat, and the price
// the sender is charged (COIN), which the contribution ranking counts.
type GiftCharge struct {
	Heat  int64
	Value int64
}

// sendGift runs a SendGift whose rules passed: reserve in the wallet,
// append with the gift's outcome row, then settle. A gift is settled by
// whoever learns its outcome first (this grain, a retry, or the wallet's
// reconciler); settling is idempotent, so doing it twice is harmless.
func (g *grain) sendGift(ctx actor.Context, cmd room.Command) (*v1.CommandReply, error) {
	// A key older than the cached ones is looked up before any money
	// moves: its reuse must not reach the wallet.
	if reply, err := g.recorded(cmd); err == nil || errors.Is(err, errclass.Exists) {
		return reply, err
	} else if !errors.Is(err, persistence.ErrNotFound) {
		return nil, err
	}
	if g.deps.Gifts == nil {
		return nil, fmt.Errorf("%w: no wallet configured", errclass.Unavailable)
	}
	wctx, cancel := g.storeCtx()
	charge, err := g.deps.Gifts.HoldGift(wctx, GiftDebit{
		AppCode: cmd.AppCode, RoomID: cmd.RoomID, CommandID: cmd.CommandID,
		FromUserID: cmd.UserID, ToUserID: cmd.ToUserID, GiftID: cmd.GiftID, Count: cmd.GiftCount,
	})
	cancel()
	if err != nil {
		return nil, err
	}
	cmd.HeatValue, cmd.GiftValue = charge.Heat, charge.Value
	// The state has not moved since the first Decide, so this cannot
	// fail; if it ever did, the open reservation would be voided and
	// refunded by the reconciler.
	events, err := room.Decide(g.state, cmd)
	if err != nil {
		return nil, err
	}
	reply, err := g.commit(ctx, cmd, events)
	if err == nil {
		g.confirmGift(cmd)
	}
	return reply, err
}

// giftAppendFailed decides a gift whose append failed. The failure may
// hide a commit (a lost acknowledgement), so the grain asks the room
// store to void the gift: that either finds it sent, or makes sure it can
// never be appended, and only then is the reservation refunded. If even
// that fails the reservation stays open, and a retry or the reconciler
// decides it later.
func (g *grain) giftAppendFailed(cmd room.Command, seq int64, appendErr error) (*v1.CommandReply, error) {
	ctx, cancel := g.storeCtx()
	sent, err := g.deps.Store.VoidGift(ctx, g.key(), cmd.CommandID, g.deps.Clock().UnixMilli())
	cancel()
	if err != nil {
		g.log.Warn("gift append failed and its outcome is unknown; left to a retry or the reconciler",
			"seq", seq, "command_id", cmd.CommandID, "error", appendErr, "void_error", err)
		return nil, fmt.Errorf("%w: gift not confirmed, retry with the same command_id", errclass.Unavailable)
	}
	if sent {
		// The append did commit; the log has the reply.
		reply, err := g.recorded(cmd)
		if err != nil {
			return nil, err
		}
		g.confirmGift(cmd)
		return reply, nil
	}
	g.log.Warn("gift append failed; gift voided and refunded", "seq", seq, "command_id", cmd.CommandID, "error", appendErr)
	g.refundGift(cmd)
	return nil, room.ErrGiftRefunded
}

// confirmGift settles a logged gift. A failure only delays the receiver's
// credit: the reservation stays open and the reconciler confirms it.
func (g *grain) confirmGift(cmd room.Command) {
	ctx, cancel := g.storeCtx()
	defer cancel()
	if err := g.deps.Gifts.ConfirmGift(ctx, cmd.AppCode, cmd.CommandID); err != nil {
		g.log.Warn("gift confirm failed; the reconciler will confirm it", "command_id", cmd.CommandID, "error", err)
	}
}

// refundGift returns a voided gift's reservation. A failure leaves it to
// the reconciler, which finds the void and refunds.
func (g *grain) refundGift(cmd room.Command) {
	ctx, cancel := g.storeCtx()
	defer cancel()
	if err := g.deps.Gifts.RefundGift(ctx, cmd.AppCode, cmd.CommandID); err != nil {
		g.log.Warn("gift refund failed; the reconciler will refund it", "command_id", cmd.CommandID, "error", err)
	}
}

// FreeGifts is a GiftDebiter that moves no money and prices every gift at
// its value per unit, in heat and in COIN alike: for tests and benchmarks
// of rooms without a wallet.
type FreeGifts int64

// HoldGift implements GiftDebiter.
func (h FreeGifts) HoldGift(_ context.Context, d GiftDebit) (GiftCharge, error) {
	v := int64(h) * d.Count
	return GiftCharge{Heat: v, Value: v}, nil
}

// ConfirmGift implements GiftDebiter.
func (FreeGifts) ConfirmGift(context.Context, string, string) error { return nil }

// RefundGift implements GiftDebiter.
func (FreeGifts) RefundGift(context.Context, string, string) error { return nil }
