package wallet

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
