package wallet

import (
	"context"
	"fmt"
	"math"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// Credit reasons (metadata.reason of the WalletBalanceChanged).
const (
	ReasonTopup      = "topup"
	ReasonAdminGrant = "admin_grant"
)

// CreditRequest adds Amount of AssetType to a user's available balance.
type CreditRequest struct {
	AppCode   string
	CommandID string
	UserID    string
	AssetType string
	Amount    int64
	// Reason goes to the event's metadata; "" = topup.
	Reason string
}

// CreditResult is the first outcome of a credit's command_id.
type CreditResult struct {
	TransactionID  string `json:"transaction_id"`
	AvailableAfter int64  `json:"available_after"`
	BalanceVersion int64  `json:"balance_version"`
	Duplicate      bool   `json:"-"`
}

// Credit tops up or grants a balance. Idempotent by command_id.
func (s *Service) Credit(ctx context.Context, r CreditRequest) (CreditResult, error) {
	if err := checkIDs("app_code", r.AppCode, "command_id", r.CommandID, "user_id", r.UserID); err != nil {
		return CreditResult{}, err
	}
	if !ValidAsset(r.AssetType) {
		return CreditResult{}, errclass.Invalidf("asset_type %q is not one of %v", r.AssetType, Assets)
	}
	if r.Amount <= 0 {
		return CreditResult{}, errclass.Invalidf("amount must be positive, got %d", r.Amount)
	}
	if r.Reason == "" {
		r.Reason = ReasonTopup
	}
	if err := checkID("reason", r.Reason); err != nil || len(r.Reason) > MaxReasonLen {
		return CreditResult{}, errclass.Invalidf("reason %q is not a short identifier", r.Reason)
	}
	fp := fmt.Sprintf("credit|%s|%s|%d|%s", r.UserID, r.AssetType, r.Amount, r.Reason)
	key := persistence.AccountKey{AppCode: r.AppCode, UserID: r.UserID, AssetType: r.AssetType}
	now, txID := s.now(), s.newID()
	tx := persistence.WalletTx{AppCode: r.AppCode, CommandID: r.CommandID, Lock: []persistence.AccountKey{key}}
	tx.Decide = func(v persistence.WalletView) (persistence.WalletPlan, error) {
		old := v.Accounts[key]
		if old.Available > math.MaxInt64-r.Amount {
			return persistence.WalletPlan{}, errclass.Invalidf("credit of %d would overflow the %s balance", r.Amount, r.AssetType)
		}
		pl := newPlanner(r.AppCode, r.CommandID, txID, KindCredit, fp, now)
		a := pl.change(old, r.Amount, map[string]string{"reason": r.Reason})
		return pl.done(CreditResult{TransactionID: txID, AvailableAfter: a.Available, BalanceVersion: a.BalanceVersion})
	}
	var res CreditResult
	dup, err := s.exec(ctx, tx, fp, &res)
	res.Duplicate = dup
	return res, err
}
