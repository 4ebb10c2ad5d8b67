package giftdebit

import (
	"context"
	"errors"
	"time"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/errclass"
)

// Wallet is the wallet's reserve → confirm / refund of a room gift
// (*wallet.Service).
type Wallet interface {
	HoldGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error)
	ConfirmGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error)
	RefundGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error)
}

// Adapter implements roomgrain.GiftDebiter over the in-process wallet.
type Adapter struct{ W Wallet }

var _ roomgrain.GiftDebiter = Adapter{}

// New returns the room's view of w.
func New(w Wallet) Adapter { return Adapter{W: w} }

func request(d roomgrain.GiftDebit) wallet.DebitGiftRequest {
	return wallet.DebitGiftRequest{
		AppCode: d.AppCode, CommandID: d.CommandID, RoomID: d.RoomID,
		FromUserID: d.FromUserID, ToUserID: d.ToUserID, GiftID: d.GiftID, Count: d.Count,
	}
}

// HoldGift reserves the gift under the room command's command_id and
// returns the heat and the price the wallet charged.
func (a Adapter) HoldGift(ctx context.Context, d roomgrain.GiftDebit) (roomgrain.GiftCharge, error) {
	res, err := a.W.HoldGift(ctx, request(d))
	if err != nil {
		return roomgrain.GiftCharge{}, unavailableIfContext(err)
	}
	return roomgrain.GiftCharge{Heat: res.HeatValue, Value: res.PriceTotal}, nil
}

// ConfirmGift implements roomgrain.GiftDebiter.
func (a Adapter) ConfirmGift(ctx context.Context, appCode, commandID string) error {
	_, err := a.W.ConfirmGift(ctx, appCode, commandID)
	return unavailableIfContext(err)
}

// RefundGift implements roomgrain.GiftDebiter.
func (a Adapter) RefundGift(ctx context.Context, appCode, commandID string) error {
	_, err := a.W.RefundGift(ctx, appCode, commandID)
	return unavailableIfContext(err)
}

// Remote implements roomgrain.GiftDebiter over a remote WalletService
// (*grpcapi.WalletClient, which speaks the same three steps as the
// in-process wallet and maps statuses back to the vocabulary). Each call
// is bounded by Timeout on top of the caller's deadline, so a wallet
// that hangs cannot hold a room grain longer than that.
type Remote struct {
	W       Wallet
	Timeout time.Duration // 0: the caller's deadline only
}

var _ roomgrain.GiftDebiter = Remote{}

func (r Remote) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.Timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.Timeout)
}

// HoldGift reserves the gift in the remote wallet.
func (r Remote) HoldGift(ctx context.Context, d roomgrain.GiftDebit) (roomgrain.GiftCharge, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	return Adapter{W: r.W}.HoldGift(ctx, d)
}

// ConfirmGift implements roomgrain.GiftDebiter.
func (r Remote) ConfirmGift(ctx context.Context, appCode, commandID string) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	return Adapter{W: r.W}.ConfirmGift(ctx, appCode, commandID)
}

// RefundGift implements roomgrain.GiftDebiter.
func (r Remote) RefundGift(ctx context.Context, appCode, commandID string) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	return Adapter{W: r.W}.RefundGift(ctx, appCode, commandID)
}

// unavailableIfContext leaves wallet errors alone (they are in the shared
// vocabulary, which the room's classes are too) and puts a bare context
// error from a Debiter in Unavailable: the room retries the command with
// the same command_id, which the wallet recognises.
func unavailableIfContext(err error) error {
	if err != nil && errclass.Of(err) == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return classed{errclass.Unavailable, err}
	}
	return err
}

type classed struct{ class, err error }

func (c classed) Error() string   { return c.err.Error() }
func (c classed) Unwrap() []error { return []error{c.class, c.err} }
