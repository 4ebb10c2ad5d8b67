package wallet

import (
	"context"
	"fmt"
	"strconv"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// PurchaseVipRequest buys or grants one period of a VIP level.
type PurchaseVipRequest struct {
	AppCode   string
	CommandID string
	UserID    string
	Level     int32
	// Source: vip_purchase pays the plan's price in COIN; admin_grant and
	// activity_grant are free. "" = vip_purchase.
	Source string
}

// PurchaseVipResult is the first outcome of the command_id.
type PurchaseVipResult struct {
	TransactionID string `json:"transaction_id"`
	Action        string `json:"action"`
	PreviousLevel int32  `json:"previous_level"`
	Level         int32  `json:"level"`
	VipName       string `json:"vip_name"`
	StartedAtMs   int64  `json:"started_at_ms"`
	ExpiresAtMs   int64  `json:"expires_at_ms"`
	PricePaid     int64  `json:"price_paid"`
	// CoinAfter is the COIN balance after paying; with nothing paid it is
	// the balance seen in the transaction.
	CoinAfter int64 `json:"coin_after"`
	Duplicate bool  `json:"-"`
}

// PurchaseVip upgrades to a higher level (a new period starts now; what was
// left of the lower level is not carried over) or renews the active level
// (one period is added to its expiry). A lower level than the active one is
// ErrVipDowngrade. It writes VipActivated and, when COIN was paid, a
// WalletBalanceChanged, in the same transaction.
func (s *Service) PurchaseVip(ctx context.Context, r PurchaseVipRequest) (PurchaseVipResult, error) {
	if err := checkIDs("app_code", r.AppCode, "command_id", r.CommandID, "user_id", r.UserID); err != nil {
		return PurchaseVipResult{}, err
	}
	if r.Source == "" {
		r.Source = SourceVipPurchase
	}
	switch r.Source {
	case SourceVipPurchase, SourceAdminGrant, SourceActivityGrant:
	default:
		return PurchaseVipResult{}, errclass.Invalidf("source %q is not vip_purchase, admin_grant or activity_grant", r.Source)
	}
	plan, ok := s.vips[r.Level]
	if !ok {
		return PurchaseVipResult{}, errclass.Invalidf("unknown VIP level %d", r.Level)
	}
	price := plan.Price
	if r.Source != SourceVipPurchase {
		price = 0
	}
	fp := fmt.Sprintf("vip|%s|%d|%s", r.UserID, r.Level, r.Source)
	coin := persistence.AccountKey{AppCode: r.AppCode, UserID: r.UserID, AssetType: AssetCoin}
	now, txID := s.now(), s.newID()
	tx := persistence.WalletTx{AppCode: r.AppCode, CommandID: r.CommandID, Lock: []persistence.AccountKey{coin}, LockVip: r.UserID}
	tx.Decide = func(v persistence.WalletView) (persistence.WalletPlan, error) {
		cur := v.Vip
		prev := cur.ActiveLevel(now)
		next := persistence.Vip{AppCode: r.AppCode, UserID: r.UserID, Level: r.Level, UpdatedAtMs: now}
		var action string
		switch {
		case r.Level > prev:
			action, next.StartedAtMs, next.ExpiresAtMs = ActionUpgrade, now, now+plan.DurationMs
		case r.Level == prev:
			action, next.StartedAtMs, next.ExpiresAtMs = ActionRenew, cur.StartedAtMs, cur.ExpiresAtMs+plan.DurationMs
		default:
			return persistence.WalletPlan{}, fmt.Errorf("%w: active VIP%d, requested VIP%d", ErrVipDowngrade, prev, r.Level)
		}
		acc := v.Accounts[coin]
		if acc.Available < price {
			return persistence.WalletPlan{}, fmt.Errorf("%w: %s has %d COIN, VIP%d costs %d", ErrInsufficientBalance, r.UserID, acc.Available, r.Level, price)
		}
		pl := newPlanner(r.AppCode, r.CommandID, txID, KindVip, fp, now)
		if price > 0 {
			acc = pl.change(acc, -price, map[string]string{
				"reason": r.Source, "vip_level": strconv.Itoa(int(r.Level)), "vip_action": action,
			})
		}
		pl.p.Vip = &next
		ev := VipActivated{
			EventType: persistence.EventVipActivated, EventID: persistence.VipEventID(txID, r.UserID), AppCode: r.AppCode,
			TransactionID: txID, CommandID: r.CommandID, UserID: r.UserID, AssetType: AssetVip,
			Source: r.Source, Action: action, PreviousLevel: prev, Level: r.Level, VipName: plan.Name,
			StartedAtMs: next.StartedAtMs, ExpiresAtMs: next.ExpiresAtMs,
			RewardResourceGroupID: plan.RewardResourceGroupID, RewardItems: []RewardItem{},
			SourceCreatedAtMs: now,
		}
		pl.outbox(ev.EventID, r.UserID, ev.EventType, ev)
		return pl.done(PurchaseVipResult{
			TransactionID: txID, Action: action, PreviousLevel: prev, Level: r.Level, VipName: plan.Name,
			StartedAtMs: next.StartedAtMs, ExpiresAtMs: next.ExpiresAtMs, PricePaid: price, CoinAfter: acc.Available,
		})
	}
	var res PurchaseVipResult
	dup, err := s.exec(ctx, tx, fp, &res)
	res.Duplicate = dup
	return res, err
}
