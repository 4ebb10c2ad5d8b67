package persistence

import (
	"context"
	"unicode/utf8"
)

// GiftHold is the reservation of one gift (wallet_gift_holds): the price
// moved from the sender's available COIN to frozen under the room
// command's command_id, until the gift is confirmed (frozen spent, the
// receiver credited) or refunded (frozen back to available).
type GiftHold struct {
	AppCode       string `json:"app_code"`
	CommandID     string `json:"command_id"`
	TransactionID string `json:"transaction_id"` // of the reserve
	RoomID        string `json:"room_id"`
	FromUserID    string `json:"from_user_id"`
	ToUserID      string `json:"to_user_id"`
	GiftID        string `json:"gift_id"`
	Count         int64  `json:"gift_count"`
	PriceTotal    int64  `json:"price_total"`
	DiamondTotal  int64  `json:"diamond_total"`
	HeatValue     int64  `json:"heat_value"`
	State         string `json:"state"`
	// SettleTransactionID is the confirm's or the refund's transaction.
	SettleTransactionID string `json:"settle_transaction_id"`
	CreatedAtMs         int64  `json:"created_at_ms"`
	UpdatedAtMs         int64  `json:"updated_at_ms"`
	// ParkedAtMs is when the gift reconciler parked the open reservation
	// (0 = not parked): its settlement kept failing, so no reconciler on
	// any node tries it again and an operator resolves it (confirm or
	// refund). A settled row keeps it as history. ParkReason is the last
	// failure, for the operator.
	ParkedAtMs int64  `json:"parked_at_ms"`
	ParkReason string `json:"park_reason"`
}

// MaxParkReason bounds GiftHold.ParkReason (the column's width); longer
// reasons are cut by the store.
const MaxParkReason = 512

// Gift hold states.
const (
	HoldOpen      = "open"
	HoldConfirmed = "confirmed"
	HoldRefunded  = "refunded"
)

func validHoldState(s string) bool { return s == HoldOpen || s == HoldConfirmed || s == HoldRefunded }

// HoldStats summarises the open reservations for metrics.
type HoldStats struct {
	Open              int64 // parked ones included
	OldestCreatedAtMs int64 // 0 when none is open
	Parked            int64 // open and parked
}

// GiftHoldStore is the part of WalletStore that reads reservations. Rows
// are written by Exec (WalletPlan.Hold), in the transaction that moves the
// money.
type GiftHoldStore interface {
	// GiftHold returns the reservation of commandID, or
	// ErrNotFound.
	GiftHold(ctx context.Context, appCode, commandID string) (GiftHold, error)
	// OpenGiftHolds returns up to limit open reservations created before
	// beforeMs that are not parked, oldest first: the reconciler's scan.
	OpenGiftHolds(ctx context.Context, beforeMs int64, limit int) ([]GiftHold, error)
	// ParkedGiftHolds returns up to limit open, parked reservations in
	// the order they were parked: the operator's list.
	ParkedGiftHolds(ctx context.Context, limit int) ([]GiftHold, error)
	// GiftHoldStats counts the open reservations (and the parked ones
	// among them) and finds the oldest.
	GiftHoldStats(ctx context.Context) (HoldStats, error)
	// ParkGiftHold marks an open reservation parked at nowMs with reason
	// (cut to MaxParkReason bytes) and reports whether this call parked
	// it: false when it was already parked or is settled (a settle that
	// raced the park wins, nothing changes). A missing reservation is
	// ErrNotFound. Only the park columns change: the money and the state
	// are the wallet transaction's (Exec) alone, and a settle keeps the
	// park columns.
	ParkGiftHold(ctx context.Context, appCode, commandID string, nowMs int64, reason string) (bool, error)
}

// CutParkReason cuts reason to MaxParkReason bytes without splitting a
// UTF-8 sequence.
func CutParkReason(reason string) string {
	if len(reason) <= MaxParkReason {
		return reason
	}
	cut := MaxParkReason
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut]
}
