package giftdebit

import (
	"context"
	"errors"
	"fmt"

	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/wallet"
)

// Wallet is the wallet's reserve → confirm / refund of a room gift
// (*wallet.Service).
type Wallet interface {
	HoldGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error)
	ConfirmGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error)
	RefundGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error)
}

// Adapter implements room.GiftDebiter over the in-process wallet.
type Adapter struct{ W Wallet }

var _ room.GiftDebiter = Adapter{}

// New returns the room's view of w.
func New(w Wallet) Adapter { return Adapter{W: w} }

func request(d room.GiftDebit) wallet.DebitGiftRequest {
	return wallet.DebitGiftRequest{
		AppCode: d.AppCode, CommandID: d.CommandID, RoomID: d.RoomID,
		FromUserID: d.FromUserID, ToUserID: d.ToUserID, GiftID: d.GiftID, Count: d.Count,
	}
}

// HoldGift reserves the gift under the room command's command_id and
// returns the heat the wallet priced it at.
func (a Adapter) HoldGift(ctx context.Context, d room.GiftDebit) (int64, error) {
	res, err := a.W.HoldGift(ctx, request(d))
	if err != nil {
		return 0, roomError(err)
	}
	return res.HeatValue, nil
}

// ConfirmGift implements room.GiftDebiter.
func (a Adapter) ConfirmGift(ctx context.Context, appCode, commandID string) error {
	_, err := a.W.ConfirmGift(ctx, appCode, commandID)
	return roomError(err)
}

// RefundGift implements room.GiftDebiter.
func (a Adapter) RefundGift(ctx context.Context, appCode, commandID string) error {
	_, err := a.W.RefundGift(ctx, appCode, commandID)
	return roomError(err)
}

// Debiter is the wallet's one-step gift charge, all a remote
// WalletService (*grpcapi.WalletClient) offers the room.
type Debiter interface {
	DebitGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error)
}

// Remote implements room.GiftDebiter over a remote wallet that can only
// debit in one step: the hold is the whole charge, a confirm has nothing
// left to do, and a refund is impossible, so a gift whose room write
// fails stays charged (docs/wallet.md, "remote wallet").
type Remote struct{ D Debiter }

var _ room.GiftDebiter = Remote{}

// ErrNoRefund: the remote wallet cannot return a charge.
var ErrNoRefund = errors.New("the remote wallet (wallet.addr) cannot refund a gift; an operator must credit it back")

// HoldGift charges the gift under the room command's command_id.
func (r Remote) HoldGift(ctx context.Context, d room.GiftDebit) (int64, error) {
	res, err := r.D.DebitGift(ctx, request(d))
	if err != nil {
		return 0, roomError(err)
	}
	return res.HeatValue, nil
}

// ConfirmGift: the debit already paid the receiver.
func (Remote) ConfirmGift(context.Context, string, string) error { return nil }

// RefundGift always fails with ErrNoRefund, in the Unavailable class.
func (Remote) RefundGift(_ context.Context, _, commandID string) error {
	return classed{room.ErrUnavailable, fmt.Errorf("gift %q: %w", commandID, ErrNoRefund)}
}

// roomError puts err in the room class the gRPC layer maps to the same
// status code, keeping the wallet's text as the whole message (the class
// names read the same in both packages, so nothing is said twice).
func roomError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wallet.ErrInvalid):
		return classed{room.ErrInvalid, err}
	case errors.Is(err, wallet.ErrPrecondition):
		return classed{room.ErrPrecondition, err}
	case errors.Is(err, wallet.ErrConflict):
		return classed{room.ErrExists, err}
	case errors.Is(err, wallet.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return classed{room.ErrUnavailable, err}
	}
	return err
}

type classed struct{ class, err error }

func (c classed) Error() string   { return c.err.Error() }
func (c classed) Unwrap() []error { return []error{c.class, c.err} }
