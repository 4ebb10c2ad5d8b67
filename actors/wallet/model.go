package wallet

import (
	"encoding/json"
	"strings"
)

// Asset types. Amounts of every asset are int64 minor units; there is no
// float anywhere in the wallet.
const (
	AssetCoin    = "COIN"
	AssetDiamond = "DIAMOND"
	// AssetVip is only the asset_type of a VipActivated payload (seed 003);
	// VIP is a state, not a balance.
	AssetVip = "VIP"
)

// Assets lists the balance assets, in the order GetBalances returns them.
var Assets = []string{AssetCoin, AssetDiamond}

// ValidAsset reports whether a is a balance asset.
func ValidAsset(a string) bool {
	for _, x := range Assets {
		if x == a {
			return true
		}
	}
	return false
}

// Outbox event types of wallet_outbox (seed 003).
const (
	EventBalanceChanged = "WalletBalanceChanged"
	EventVipActivated   = "VipActivated"
)

// Transaction kinds, the kind column of a transaction record.
const (
	KindCredit = "credit"
	KindGift   = "gift"
	KindVip    = "vip"
)

// VIP sources and actions (seed 003's VipActivated).
const (
	SourceVipPurchase   = "vip_purchase"
	SourceAdminGrant    = "admin_grant"
	SourceActivityGrant = "activity_grant"

	ActionUpgrade = "upgrade"
	ActionRenew   = "renew"
)

// AccountKey names one account.
type AccountKey struct {
	AppCode   string
	UserID    string
	AssetType string
}

func (k AccountKey) String() string { return k.AppCode + "/" + k.UserID + "/" + k.AssetType }

// Less orders keys by (app_code, user_id, asset_type): the order in which
// a store locks accounts, so two transactions never wait on each other in
// a cycle.
func (k AccountKey) Less(o AccountKey) bool {
	if c := strings.Compare(k.AppCode, o.AppCode); c != 0 {
		return c < 0
	}
	if c := strings.Compare(k.UserID, o.UserID); c != 0 {
		return c < 0
	}
	return k.AssetType < o.AssetType
}

// Account is one balance. BalanceVersion goes up by exactly one per change,
// so a client can drop a stale or repeated WalletBalanceChanged.
type Account struct {
	AppCode        string `json:"app_code"`
	UserID         string `json:"user_id"`
	AssetType      string `json:"asset_type"`
	Available      int64  `json:"available"`
	Frozen         int64  `json:"frozen"`
	BalanceVersion int64  `json:"balance_version"`
	UpdatedAtMs    int64  `json:"updated_at_ms"`
}

// Key returns the account's key.
func (a Account) Key() AccountKey {
	return AccountKey{AppCode: a.AppCode, UserID: a.UserID, AssetType: a.AssetType}
}

// LedgerEntry is one change of one account. The available_after of the
// entry with the highest version is the account's available balance, and
// the sum of available_delta over an account's entries equals it too.
type LedgerEntry struct {
	TransactionID  string `json:"transaction_id"`
	CommandID      string `json:"command_id"`
	AppCode        string `json:"app_code"`
	UserID         string `json:"user_id"`
	AssetType      string `json:"asset_type"`
	AvailableDelta int64  `json:"available_delta"`
	FrozenDelta    int64  `json:"frozen_delta"`
	AvailableAfter int64  `json:"available_after"`
	FrozenAfter    int64  `json:"frozen_after"`
	BalanceVersion int64  `json:"balance_version"`
	CreatedAtMs    int64  `json:"created_at_ms"`
}

// Key returns the entry's account.
func (e LedgerEntry) Key() AccountKey {
	return AccountKey{AppCode: e.AppCode, UserID: e.UserID, AssetType: e.AssetType}
}

// Vip is one user's VIP state. Level 0 or ExpiresAtMs <= now means no VIP.
type Vip struct {
	AppCode     string `json:"app_code"`
	UserID      string `json:"user_id"`
	Level       int32  `json:"level"`
	StartedAtMs int64  `json:"started_at_ms"`
	ExpiresAtMs int64  `json:"expires_at_ms"`
	UpdatedAtMs int64  `json:"updated_at_ms"`
}

// ActiveLevel is the level in force at nowMs (0 when expired).
func (v Vip) ActiveLevel(nowMs int64) int32 {
	if v.ExpiresAtMs <= nowMs {
		return 0
	}
	return v.Level
}

// TxRecord is a committed wallet transaction: the idempotency record of
// its command_id. Result is the operation's reply as first computed,
// replayed verbatim for a repeated command_id.
type TxRecord struct {
	TransactionID string          `json:"transaction_id"`
	AppCode       string          `json:"app_code"`
	CommandID     string          `json:"command_id"`
	Kind          string          `json:"kind"`
	Fingerprint   string          `json:"fingerprint"`
	Result        json.RawMessage `json:"result"`
	CreatedAtMs   int64           `json:"created_at_ms"`
}

// OutboxEvent is a wallet_outbox row to write. Payload is the seed-003
// JSON the notice service forwards to the client.
type OutboxEvent struct {
	EventID   string
	AppCode   string
	UserID    string
	EventType string
	Payload   json.RawMessage
}

// OutboxRecord is a stored wallet_outbox row. ID is an ascending cursor for
// consumers; see Store.ListOutboxAfter for its ordering caveat.
type OutboxRecord struct {
	ID          int64           `json:"id"`
	EventID     string          `json:"event_id"`
	AppCode     string          `json:"app_code"`
	UserID      string          `json:"user_id"`
	EventType   string          `json:"event_type"`
	Payload     json.RawMessage `json:"payload"`
	Status      string          `json:"status"`
	CreatedAtMs int64           `json:"created_at_ms"`
	UpdatedAtMs int64           `json:"updated_at_ms"`
}

// Outbox statuses; wallet_outbox rows are written pending, and only an
// owner-side publisher (none yet) would set published. The notice service
// reads them and records its own delivery state elsewhere.
const (
	OutboxPending   = "pending"
	OutboxPublished = "published"
)

// BalanceChanged is the WalletBalanceChanged payload, field for field as
// seed 003 gives it.
type BalanceChanged struct {
	EventType         string            `json:"event_type"`
	EventID           string            `json:"event_id"`
	AppCode           string            `json:"app_code"`
	TransactionID     string            `json:"transaction_id"`
	CommandID         string            `json:"command_id"`
	UserID            string            `json:"user_id"`
	AssetType         string            `json:"asset_type"`
	AvailableDelta    int64             `json:"available_delta"`
	FrozenDelta       int64             `json:"frozen_delta"`
	AvailableAfter    int64             `json:"available_after"`
	FrozenAfter       int64             `json:"frozen_after"`
	BalanceVersion    int64             `json:"balance_version"`
	CreatedAtMs       int64             `json:"created_at_ms"`
	SourceCreatedAtMs int64             `json:"source_created_at_ms"`
	Metadata          map[string]string `json:"metadata"`
}

// VipActivated is the VipActivated payload, field for field as seed 003
// gives it.
type VipActivated struct {
	EventType             string       `json:"event_type"`
	EventID               string       `json:"event_id"`
	AppCode               string       `json:"app_code"`
	TransactionID         string       `json:"transaction_id"`
	CommandID             string       `json:"command_id"`
	UserID                string       `json:"user_id"`
	AssetType             string       `json:"asset_type"`
	Source                string       `json:"source"`
	Action                string       `json:"action"`
	PreviousLevel         int32        `json:"previous_level"`
	Level                 int32        `json:"level"`
	VipName               string       `json:"vip_name"`
	StartedAtMs           int64        `json:"started_at_ms"`
	ExpiresAtMs           int64        `json:"expires_at_ms"`
	RewardResourceGroupID int64        `json:"reward_resource_group_id"`
	ResourceGrantID       string       `json:"resource_grant_id"`
	RewardItems           []RewardItem `json:"reward_items"`
	SourceCreatedAtMs     int64        `json:"source_created_at_ms"`
}

// RewardItem is one item of a VIP reward. Resource groups are not granted
// by this wallet yet, so reward_items is always [].
type RewardItem struct {
	ResourceType string `json:"resource_type"`
	ResourceID   string `json:"resource_id"`
	Quantity     int64  `json:"quantity"`
}

// BalanceEventID is seed 003's event_id of a WalletBalanceChanged:
// "<transaction_id>:WalletBalanceChanged:<user_id>:<asset_type>". It is
// derived, not random, so the same change always has the same id.
func BalanceEventID(txID, userID, asset string) string {
	return txID + ":" + EventBalanceChanged + ":" + userID + ":" + asset
}

// VipEventID is the event_id of a VipActivated, in the same derived form.
func VipEventID(txID, userID string) string {
	return txID + ":" + EventVipActivated + ":" + userID
}
