package giftdebit

import (
	"context"
	"errors"

	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/wallet"
)

// Debiter is the wallet's gift charge.
type Debiter interface {
	DebitGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error)
}

// Adapter implements room.GiftDebiter.
type Adapter struct{ W Debiter }

var _ room.GiftDebiter = Adapter{}

// New returns the room's view of w.
func New(w Debiter) Adapter { return Adapter{W: w} }

// DebitGift charges the gift under the room command's command_id and
// returns the heat the wallet priced it at.
func (a Adapter) DebitGift(ctx context.Context, d room.GiftDebit) (int64, error) {
	res, err := a.W.DebitGift(ctx, wallet.DebitGiftRequest{
		AppCode: d.AppCode, CommandID: d.CommandID, RoomID: d.RoomID,
		FromUserID: d.FromUserID, ToUserID: d.ToUserID, GiftID: d.GiftID, Count: d.Count,
	})
	if err != nil {
		return 0, roomError(err)
	}
	return res.HeatValue, nil
}

// roomError puts err in the room class the gRPC layer maps to the same
// status code, keeping the wallet's text as the whole message (the class
// names read the same in both packages, so nothing is said twice).
func roomError(err error) error {
	switch {
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
