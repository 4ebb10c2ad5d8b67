package wallet

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// DebitGiftRequest is the room grain's charge for a gift: the sender pays
// price × count COIN, the receiver gets DIAMOND at the configured percent.
// CommandID is the room command's: a retried SendGift charges once.
type DebitGiftRequest struct {
	AppCode    string
	CommandID  string
	RoomID     string
	FromUserID string
	ToUserID   string
	GiftID     string
	Count      int64
}

// DebitGiftResult is the first outcome of the command_id, replayed for a
// repeat (Duplicate true) even if the catalog changed since.
type DebitGiftResult struct {
	TransactionID        string `json:"transaction_id"`
	PriceTotal           int64  `json:"price_total"`
	HeatValue            int64  `json:"heat_value"`
	DiamondTotal         int64  `json:"diamond_total"`
	SenderCoinAfter      int64  `json:"sender_coin_after"`
	ReceiverDiamondAfter int64  `json:"receiver_diamond_after"`
	Duplicate            bool   `json:"-"`
}

// Metadata reasons of a gift's two WalletBalanceChanged events.
const (
	ReasonGiftSend    = "gift_send"
	ReasonGiftReceive = "gift_receive"
)

// GiftQuote is what a gift costs and yields, from the catalog.
type GiftQuote struct {
	PriceTotal, DiamondTotal, HeatValue int64
}

// QuoteGift prices count of giftID. Unknown gifts and totals that overflow
// int64 are errclass.Invalid.
func (s *Service) QuoteGift(giftID string, count int64) (GiftQuote, error) {
	g, ok := s.gifts[giftID]
	if !ok {
		return GiftQuote{}, errclass.Invalidf("unknown gift_id %q", giftID)
	}
	if count <= 0 || count > MaxGiftCount {
		return GiftQuote{}, errclass.Invalidf("gift count must be between 1 and %d, got %d", MaxGiftCount, count)
	}
	price, ok1 := mul(g.Price, count)
	heat, ok2 := mul(g.Heat, count)
	dia, ok3 := mul(price, s.diamondPercent)
	if !ok1 || !ok2 || !ok3 {
		return GiftQuote{}, errclass.Invalidf("%d × %q overflows", count, giftID)
	}
	return GiftQuote{PriceTotal: price, DiamondTotal: dia / 100, HeatValue: heat}, nil
}

// mul multiplies non-negative a and b, reporting overflow of int64.
func mul(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// checkGift validates a gift request and prices it.
func (s *Service) checkGift(r DebitGiftRequest) (GiftQuote, error) {
	if err := checkIDs("app_code", r.AppCode, "command_id", r.CommandID, "room_id", r.RoomID,
		"from_user_id", r.FromUserID, "to_user_id", r.ToUserID, "gift_id", r.GiftID); err != nil {
		return GiftQuote{}, err
	}
	if r.FromUserID == r.ToUserID {
		return GiftQuote{}, errclass.Invalidf("a gift's sender and receiver must differ")
	}
	return s.QuoteGift(r.GiftID, r.Count)
}

// giftFingerprint is the request a gift's command_id is bound to; kind
// keeps a one-step debit and a reservation under one id apart.
func giftFingerprint(kind string, r DebitGiftRequest) string {
	return fmt.Sprintf("%s|%s|%s|%s|%s|%d", kind, r.RoomID, r.FromUserID, r.ToUserID, r.GiftID, r.Count)
}

// DebitGift charges a gift in one transaction: sender COIN down, receiver
// DIAMOND up, one WalletBalanceChanged per changed account. An insufficient
// balance is ErrInsufficientBalance and writes nothing.
func (s *Service) DebitGift(ctx context.Context, r DebitGiftRequest) (DebitGiftResult, error) {
	q, err := s.checkGift(r)
	if err != nil {
		return DebitGiftResult{}, err
	}
	fp := giftFingerprint("gift", r)
	from := persistence.AccountKey{AppCode: r.AppCode, UserID: r.FromUserID, AssetType: AssetCoin}
	to := persistence.AccountKey{AppCode: r.AppCode, UserID: r.ToUserID, AssetType: AssetDiamond}
	now, txID := s.now(), s.newID()
	meta := func(reason, other string) map[string]string {
		return map[string]string{
			"reason": reason, "room_id": r.RoomID, "gift_id": r.GiftID,
			"gift_count": strconv.FormatInt(r.Count, 10), "counterparty_user_id": other,
		}
	}
	tx := persistence.WalletTx{AppCode: r.AppCode, CommandID: r.CommandID, Lock: []persistence.AccountKey{from, to}}
	tx.Decide = func(v persistence.WalletView) (persistence.WalletPlan, error) {
		sender, receiver := v.Accounts[from], v.Accounts[to]
		if sender.Available < q.PriceTotal {
			return persistence.WalletPlan{}, fmt.Errorf("%w: %s has %d COIN, gift costs %d", ErrInsufficientBalance, r.FromUserID, sender.Available, q.PriceTotal)
		}
		if receiver.Available > math.MaxInt64-q.DiamondTotal {
			return persistence.WalletPlan{}, errclass.Invalidf("gift would overflow the receiver's DIAMOND balance")
		}
		pl := newPlanner(r.AppCode, r.CommandID, txID, KindGift, fp, now)
		// A free gift (or a 0% ratio) changes no balance: no ledger entry
		// and no event for that account, but the transaction is recorded
		// so its command_id stays idempotent.
		if q.PriceTotal > 0 {
			sender = pl.change(sender, -q.PriceTotal, meta(ReasonGiftSend, r.ToUserID))
		}
		if q.DiamondTotal > 0 {
			receiver = pl.change(receiver, q.DiamondTotal, meta(ReasonGiftReceive, r.FromUserID))
		}
		return pl.done(DebitGiftResult{
			TransactionID: txID, PriceTotal: q.PriceTotal, HeatValue: q.HeatValue, DiamondTotal: q.DiamondTotal,
			SenderCoinAfter: sender.Available, ReceiverDiamondAfter: receiver.Available,
		})
	}
	var res DebitGiftResult
	dup, err := s.exec(ctx, tx, fp, &res)
	res.Duplicate = dup
	return res, err
}
