package wallet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// Transaction kinds of a room gift's three steps.
const (
	KindGiftHold    = "gift_hold"
	KindGiftConfirm = "gift_confirm"
	KindGiftRefund  = "gift_refund"
)

// Metadata reasons of the reservation's and the refund's
// WalletBalanceChanged (the confirm's are ReasonGiftSend/Receive).
const (
	ReasonGiftHold   = "gift_hold"
	ReasonGiftRefund = "gift_refund"
)

// settleCommandID is the wallet command_id of a gift's settlement. Confirm
// and refund share it, so the unique key of wallet_transactions lets only
// one of them ever commit. The ':' keeps it out of any caller's reach
// (checkID refuses ':' in command ids), and hashing keeps it within the
// column whatever the gift's id.
func settleCommandID(commandID string) string {
	sum := sha256.Sum256([]byte(commandID))
	return "giftsettle:" + hex.EncodeToString(sum[:20])
}

// HoldGift reserves a room gift's price: the sender's COIN moves from
// available to frozen under the gift's command_id, and the reservation
// row records what ConfirmGift will pay. The receiver is not credited
// yet. The same request again reserves nothing more; a gift already
// refunded is ErrGiftRefunded.
func (s *Service) HoldGift(ctx context.Context, r DebitGiftRequest) (DebitGiftResult, error) {
	q, err := s.checkGift(r)
	if err != nil {
		return DebitGiftResult{}, err
	}
	fp := giftFingerprint(KindGiftHold, r)
	from := persistence.AccountKey{AppCode: r.AppCode, UserID: r.FromUserID, AssetType: AssetCoin}
	to := persistence.AccountKey{AppCode: r.AppCode, UserID: r.ToUserID, AssetType: AssetDiamond}
	now, txID := s.now(), s.newID()
	// The receiver is read (locked, not changed) so what would fail the
	// confirm is refused before anything is held: a hold whose confirm
	// can never succeed kept the sender's COIN frozen for good.
	tx := persistence.WalletTx{AppCode: r.AppCode, CommandID: r.CommandID, Lock: []persistence.AccountKey{from, to}}
	tx.Decide = func(v persistence.WalletView) (persistence.WalletPlan, error) {
		sender := v.Accounts[from]
		if sender.Available < q.PriceTotal {
			return persistence.WalletPlan{}, fmt.Errorf("%w: %s has %d COIN, gift costs %d", ErrInsufficientBalance, r.FromUserID, sender.Available, q.PriceTotal)
		}
		if v.Accounts[to].Available > math.MaxInt64-q.DiamondTotal {
			return persistence.WalletPlan{}, errclass.Invalidf("gift would overflow the receiver's DIAMOND balance")
		}
		pl := newPlanner(r.AppCode, r.CommandID, txID, KindGiftHold, fp, now)
		if q.PriceTotal > 0 {
			sender = pl.move(sender, -q.PriceTotal, q.PriceTotal, giftMeta(ReasonGiftHold, r.CommandID, r.RoomID, r.GiftID, r.Count, r.ToUserID))
		}
		pl.p.Hold = &persistence.GiftHold{
			AppCode: r.AppCode, CommandID: r.CommandID, TransactionID: txID, RoomID: r.RoomID,
			FromUserID: r.FromUserID, ToUserID: r.ToUserID, GiftID: r.GiftID, Count: r.Count,
			PriceTotal: q.PriceTotal, DiamondTotal: q.DiamondTotal, HeatValue: q.HeatValue,
			State: persistence.HoldOpen, CreatedAtMs: now, UpdatedAtMs: now,
		}
		return pl.done(DebitGiftResult{
			TransactionID: txID, PriceTotal: q.PriceTotal, HeatValue: q.HeatValue, DiamondTotal: q.DiamondTotal,
			SenderCoinAfter: sender.Available,
		})
	}
	var res DebitGiftResult
	dup, err := s.exec(ctx, tx, fp, &res)
	if err != nil || !dup {
		return res, err
	}
	res.Duplicate = true
	h, err := s.store.GiftHold(ctx, r.AppCode, r.CommandID)
	if err != nil {
		return DebitGiftResult{}, classify(err)
	}
	if h.State == persistence.HoldRefunded {
		return DebitGiftResult{}, fmt.Errorf("%w (command_id %q)", ErrGiftRefunded, r.CommandID)
	}
	return res, nil
}

func giftMeta(reason, commandID, roomID, giftID string, count int64, other string) map[string]string {
	return map[string]string{
		"reason": reason, "room_id": roomID, "gift_id": giftID, "gift_command_id": commandID,
		"gift_count": strconv.FormatInt(count, 10), "counterparty_user_id": other,
	}
}

// SettleResult is the outcome of a gift's confirm or refund.
type SettleResult struct {
	TransactionID string `json:"transaction_id"`
	State         string `json:"state"`
}

// ConfirmGift spends a held gift the room logged: the sender's frozen COIN
// goes and the receiver gets the DIAMOND share. Idempotent; a gift
// already refunded is errclass.Precondition (the room's void fence makes that
// impossible for a logged gift).
func (s *Service) ConfirmGift(ctx context.Context, appCode, commandID string) (SettleResult, error) {
	return s.settle(ctx, appCode, commandID, persistence.HoldConfirmed)
}

// RefundGift returns a held gift the room voided: the sender's frozen COIN
// goes back to available. Idempotent; a gift without a reservation has
// nothing to refund.
func (s *Service) RefundGift(ctx context.Context, appCode, commandID string) (SettleResult, error) {
	return s.settle(ctx, appCode, commandID, persistence.HoldRefunded)
}

func (s *Service) settle(ctx context.Context, appCode, commandID, to string) (SettleResult, error) {
	if err := checkIDs("app_code", appCode, "command_id", commandID); err != nil {
		return SettleResult{}, err
	}
	h, err := s.store.GiftHold(ctx, appCode, commandID)
	if errors.Is(err, persistence.ErrNotFound) {
		if to == persistence.HoldRefunded {
			return SettleResult{State: persistence.HoldRefunded}, nil
		}
		return SettleResult{}, fmt.Errorf("%w: %q", ErrGiftNotReserved, commandID)
	}
	if err != nil {
		return SettleResult{}, classify(err)
	}
	if h.State != persistence.HoldOpen {
		return settled(h.State, to, commandID, SettleResult{TransactionID: h.SettleTransactionID, State: h.State})
	}
	kind := KindGiftConfirm
	if to == persistence.HoldRefunded {
		kind = KindGiftRefund
	}
	from := persistence.AccountKey{AppCode: appCode, UserID: h.FromUserID, AssetType: AssetCoin}
	rcv := persistence.AccountKey{AppCode: appCode, UserID: h.ToUserID, AssetType: AssetDiamond}
	id, fp := settleCommandID(commandID), "giftsettle|"+commandID
	now, txID := s.now(), s.newID()
	tx := persistence.WalletTx{AppCode: appCode, CommandID: id, Lock: []persistence.AccountKey{from}}
	if to == persistence.HoldConfirmed {
		tx.Lock = append(tx.Lock, rcv)
	}
	tx.Decide = func(v persistence.WalletView) (persistence.WalletPlan, error) {
		pl := newPlanner(appCode, id, txID, kind, fp, now)
		sender := v.Accounts[from]
		if sender.Frozen < h.PriceTotal {
			return persistence.WalletPlan{}, fmt.Errorf("wallet: %s has %d frozen COIN, gift %q holds %d", h.FromUserID, sender.Frozen, commandID, h.PriceTotal)
		}
		switch {
		case to == persistence.HoldRefunded && h.PriceTotal > 0:
			pl.move(sender, h.PriceTotal, -h.PriceTotal, giftMeta(ReasonGiftRefund, commandID, h.RoomID, h.GiftID, h.Count, h.ToUserID))
		case to == persistence.HoldConfirmed:
			if h.PriceTotal > 0 {
				pl.move(sender, 0, -h.PriceTotal, giftMeta(ReasonGiftSend, commandID, h.RoomID, h.GiftID, h.Count, h.ToUserID))
			}
			if h.DiamondTotal > 0 {
				receiver := v.Accounts[rcv]
				if receiver.Available > math.MaxInt64-h.DiamondTotal {
					return persistence.WalletPlan{}, errclass.Invalidf("gift would overflow the receiver's DIAMOND balance")
				}
				pl.move(receiver, h.DiamondTotal, 0, giftMeta(ReasonGiftReceive, commandID, h.RoomID, h.GiftID, h.Count, h.FromUserID))
			}
		}
		done := h
		done.State, done.SettleTransactionID, done.UpdatedAtMs = to, txID, now
		pl.p.Hold = &done
		return pl.done(SettleResult{TransactionID: txID, State: to})
	}
	var res SettleResult
	if _, err := s.exec(ctx, tx, fp, &res); err != nil {
		return SettleResult{}, err
	}
	return settled(res.State, to, commandID, res)
}

// settled checks that a gift's one settlement is the one asked for.
func settled(state, want, commandID string, res SettleResult) (SettleResult, error) {
	if state != want {
		return SettleResult{}, fmt.Errorf("%w: %q is %s", ErrGiftSettled, commandID, state)
	}
	return res, nil
}

// OpenGiftHolds returns up to limit open reservations created before
// beforeMs, oldest first (the reconciler's scan).
func (s *Service) OpenGiftHolds(ctx context.Context, beforeMs int64, limit int) ([]persistence.GiftHold, error) {
	hs, err := s.store.OpenGiftHolds(ctx, beforeMs, limit)
	return hs, classify(err)
}

// GiftHoldStats counts the open reservations.
func (s *Service) GiftHoldStats(ctx context.Context) (persistence.HoldStats, error) {
	st, err := s.store.GiftHoldStats(ctx)
	return st, classify(err)
}

// ParkedGiftHolds returns up to limit parked open reservations, in park
// order (the operator's list).
func (s *Service) ParkedGiftHolds(ctx context.Context, limit int) ([]persistence.GiftHold, error) {
	hs, err := s.store.ParkedGiftHolds(ctx, limit)
	return hs, classify(err)
}

// ParkGift parks an open reservation whose settlement keeps failing: the
// reconciler of every node leaves it out of its scan from now on, across
// restarts, until an operator confirms or refunds it (both work on a
// parked reservation as on any open one). It reports whether this call
// parked it; a settled or already parked reservation is left as it is.
// The money does not move.
func (s *Service) ParkGift(ctx context.Context, appCode, commandID, reason string) (bool, error) {
	if err := checkIDs("app_code", appCode, "command_id", commandID); err != nil {
		return false, err
	}
	parked, err := s.store.ParkGiftHold(ctx, appCode, commandID, s.now(), reason)
	if errors.Is(err, persistence.ErrNotFound) {
		return false, fmt.Errorf("%w: %q", ErrGiftNotReserved, commandID)
	}
	return parked, classify(err)
}
