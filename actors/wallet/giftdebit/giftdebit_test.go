package giftdebit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/wallet"
	"github.com/hyapp/roomcell/errclass"
)

// fakeWallet records what it was asked and answers err; block makes every
// call wait for its context, as a hung remote wallet would.
type fakeWallet struct {
	got      wallet.DebitGiftRequest
	settled  []string
	res      wallet.DebitGiftResult
	err      error
	block    bool
	deadline bool
}

func (f *fakeWallet) wait(ctx context.Context) error {
	_, f.deadline = ctx.Deadline()
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.err
}

func (f *fakeWallet) HoldGift(ctx context.Context, r wallet.DebitGiftRequest) (wallet.DebitGiftResult, error) {
	f.got = r
	return f.res, f.wait(ctx)
}

func (f *fakeWallet) ConfirmGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error) {
	f.settled = append(f.settled, "confirm "+appCode+"/"+commandID)
	return wallet.SettleResult{}, f.wait(ctx)
}

func (f *fakeWallet) RefundGift(ctx context.Context, appCode, commandID string) (wallet.SettleResult, error) {
	f.settled = append(f.settled, "refund "+appCode+"/"+commandID)
	return wallet.SettleResult{}, f.wait(ctx)
}

func TestRemotePassesTheGiftAndReturnsHeatAndPrice(t *testing.T) {
	f := &fakeWallet{res: wallet.DebitGiftResult{HeatValue: 42, PriceTotal: 30}}
	r := Remote{W: f}
	heat, err := r.HoldGift(t.Context(), roomgrain.GiftDebit{AppCode: "a", RoomID: "r", CommandID: "c", FromUserID: "u1", ToUserID: "u2", GiftID: "rose", Count: 3})
	want := wallet.DebitGiftRequest{AppCode: "a", CommandID: "c", RoomID: "r", FromUserID: "u1", ToUserID: "u2", GiftID: "rose", Count: 3}
	if err != nil || heat != (roomgrain.GiftCharge{Heat: 42, Value: 30}) || f.got != want {
		t.Fatalf("charge %+v err %v, wallet got %+v", heat, err, f.got)
	}
	if err := r.ConfirmGift(t.Context(), "a", "c"); err != nil {
		t.Fatal(err)
	}
	if err := r.RefundGift(t.Context(), "a", "d"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.settled) != "[confirm a/c refund a/d]" {
		t.Fatalf("settlements reached the wallet as %v", f.settled)
	}
}

// A hung remote wallet answers within Timeout even when the caller set no
// deadline, and the answer is retryable.
func TestRemoteBoundsEveryCall(t *testing.T) {
	f := &fakeWallet{block: true}
	r := Remote{W: f, Timeout: 20 * time.Millisecond}
	for name, call := range map[string]func() error{
		"hold":    func() error { _, err := r.HoldGift(context.Background(), roomgrain.GiftDebit{}); return err },
		"confirm": func() error { return r.ConfirmGift(context.Background(), "a", "c") },
		"refund":  func() error { return r.RefundGift(context.Background(), "a", "c") },
	} {
		start := time.Now()
		err := call()
		if !f.deadline || time.Since(start) > 5*time.Second {
			t.Fatalf("%s: no deadline reached the wallet (took %s)", name, time.Since(start))
		}
		if errclass.Name(err) != errclass.NameUnavailable {
			t.Fatalf("%s of a hung wallet: %v (class %s), want unavailable", name, err, errclass.Name(err))
		}
	}
}

func TestAdapterMapsClasses(t *testing.T) {
	for _, tc := range []struct {
		in    error
		class string
	}{
		{fmt.Errorf("%w: 5 COIN", wallet.ErrInsufficientBalance), errclass.NamePrecondition},
		{wallet.ErrGiftRefunded, errclass.NamePrecondition},
		{fmt.Errorf("%w: unknown gift_id", errclass.Invalid), errclass.NameInvalid},
		{fmt.Errorf("%w: reused", wallet.ErrCommandReused), errclass.NameExists},
		{fmt.Errorf("%w: down", wallet.ErrUnavailable), errclass.NameUnavailable},
		{context.DeadlineExceeded, errclass.NameUnavailable},
		{errors.New("bug"), errclass.NameInternal},
	} {
		for name, g := range map[string]roomgrain.GiftDebiter{"in-process": New(&fakeWallet{err: tc.in}), "remote": Remote{W: &fakeWallet{err: tc.in}}} {
			_, err := g.HoldGift(t.Context(), roomgrain.GiftDebit{})
			if got := errclass.Name(err); got != tc.class {
				t.Errorf("%s %v: class %s, want %s", name, tc.in, got, tc.class)
			}
			if !errors.Is(err, tc.in) || err.Error() != tc.in.Error() {
				t.Errorf("%s %v: adapter lost the wallet error: %v", name, tc.in, err)
			}
			if err := g.RefundGift(t.Context(), "a", "c"); errclass.Name(err) != tc.class {
				t.Errorf("%s refund %v: class %s, want %s", name, tc.in, errclass.Name(err), tc.class)
			}
		}
	}
}
