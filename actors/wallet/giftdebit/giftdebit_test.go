package giftdebit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/wallet"
)

type fakeWallet struct {
	got wallet.DebitGiftRequest
	res wallet.DebitGiftResult
	err error
}

func (f *fakeWallet) DebitGift(_ context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error) {
	f.got = r
	return f.res, f.err
}

func TestAdapterPassesTheGiftAndReturnsHeat(t *testing.T) {
	f := &fakeWallet{res: wallet.DebitGiftResult{HeatValue: 42}}
	heat, err := Remote{D: f}.HoldGift(t.Context(), room.GiftDebit{AppCode: "a", RoomID: "r", CommandID: "c", FromUserID: "u1", ToUserID: "u2", GiftID: "rose", Count: 3})
	want := wallet.DebitGiftRequest{AppCode: "a", CommandID: "c", RoomID: "r", FromUserID: "u1", ToUserID: "u2", GiftID: "rose", Count: 3}
	if err != nil || heat != 42 || f.got != want {
		t.Fatalf("heat %d err %v, wallet got %+v", heat, err, f.got)
	}
}

func TestAdapterMapsClasses(t *testing.T) {
	for _, tc := range []struct {
		in    error
		class string
	}{
		{fmt.Errorf("%w: 5 COIN", wallet.ErrInsufficientBalance), room.ClassPrecondition},
		{fmt.Errorf("%w: unknown gift_id", wallet.ErrInvalid), room.ClassInvalid},
		{fmt.Errorf("%w: reused", wallet.ErrConflict), room.ClassExists},
		{fmt.Errorf("%w: down", wallet.ErrUnavailable), room.ClassUnavailable},
		{context.DeadlineExceeded, room.ClassUnavailable},
		{errors.New("bug"), room.ClassInternal},
	} {
		_, err := Remote{D: &fakeWallet{err: tc.in}}.HoldGift(t.Context(), room.GiftDebit{})
		if got := room.ClassOf(err); got != tc.class {
			t.Errorf("%v: class %s, want %s", tc.in, got, tc.class)
		}
		if !errors.Is(err, tc.in) || err.Error() != tc.in.Error() {
			t.Errorf("%v: adapter lost the wallet error: %v", tc.in, err)
		}
	}
}
