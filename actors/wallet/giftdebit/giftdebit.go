package giftdebit

import (
	"context"
	"errors"

	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/errclass"
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
		return 0, unavailableIfContext(err)
	}
	return res.HeatValue, nil
}

// unavailableIfContext leaves wallet errors alone (they are in the shared
// vocabulary, which the room's classes are too) and puts a bare context
// error from a Debiter in Unavailable: the room retries the command with
// the same command_id, which the wallet recognises.
func unavailableIfContext(err error) error {
	if errclass.Of(err) == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return classed{errclass.Unavailable, err}
	}
	return err
}

type classed struct{ class, err error }

func (c classed) Error() string   { return c.err.Error() }
func (c classed) Unwrap() []error { return []error{c.class, c.err} }
