package giftdebit

import (
	"context"
	"errors"
	"fmt"

	"github.com/hyapp/roomcell/actors/room"
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
		return 0, unavailableIfContext(err)
	}
	return res.HeatValue, nil
}

// ConfirmGift implements room.GiftDebiter.
func (a Adapter) ConfirmGift(ctx context.Context, appCode, commandID string) error {
	_, err := a.W.ConfirmGift(ctx, appCode, commandID)
	return unavailableIfContext(err)
}

// RefundGift implements room.GiftDebiter.
func (a Adapter) RefundGift(ctx context.Context, appCode, commandID string) error {
	_, err := a.W.RefundGift(ctx, appCode, commandID)
	return unavailableIfContext(err)
}

// Debiter is the wallet's one-step gift charge, all a remote
// WalletService (*grpcapi.WalletClient) offers the room.
type Debiter interface {
	DebitGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error)
}

// Remote implements room.GiftDebiter over a remote wallet that can only
// debit in one step: the hold is the whole charge, a confirm has nothing
// left to do, and a refund is impossible, so a gift whose room write
// fails stays charged (docs/wallet.md, "Remote wallet").
type Remote struct{ D Debiter }

var _ room.GiftDebiter = Remote{}

// ErrNoRefund: the remote wallet cannot return a charge.
var ErrNoRefund = errors.New("the remote wallet (wallet.addr) cannot refund a gift; an operator must credit it back")

// HoldGift charges the gift under the room command's command_id.
func (r Remote) HoldGift(ctx context.Context, d room.GiftDebit) (int64, error) {
	res, err := r.D.DebitGift(ctx, request(d))
	if err != nil {
		return 0, unavailableIfContext(err)
	}
	return res.HeatValue, nil
}

// ConfirmGift: the debit already paid the receiver.
func (Remote) ConfirmGift(context.Context, string, string) error { return nil }

// RefundGift always fails with ErrNoRefund, in the Unavailable class.
func (Remote) RefundGift(_ context.Context, _, commandID string) error {
	return classed{errclass.Unavailable, fmt.Errorf("gift %q: %w", commandID, ErrNoRefund)}
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
