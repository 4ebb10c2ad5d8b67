package persistence

import "context"

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
}

// Gift hold states.
const (
	HoldOpen      = "open"
	HoldConfirmed = "confirmed"
	HoldRefunded  = "refunded"
)

func validHoldState(s string) bool { return s == HoldOpen || s == HoldConfirmed || s == HoldRefunded }

// HoldStats summarises the open reservations for metrics.
type HoldStats struct {
	Open              int64
	OldestCreatedAtMs int64 // 0 when none is open
}

// GiftHoldStore is the part of WalletStore that reads reservations. Rows
// are written by Exec (WalletPlan.Hold), in the transaction that moves the
// money.
type GiftHoldStore interface {
	// GiftHold returns the reservation of commandID, or
	// ErrNotFound.
	GiftHold(ctx context.Context, appCode, commandID string) (GiftHold, error)
	// OpenGiftHolds returns up to limit open reservations created before
	// beforeMs, oldest first: the reconciler's scan.
	OpenGiftHolds(ctx context.Context, beforeMs int64, limit int) ([]GiftHold, error)
	// GiftHoldStats counts the open reservations and finds the oldest.
	GiftHoldStats(ctx context.Context) (HoldStats, error)
}
