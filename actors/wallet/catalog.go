package wallet

import (
	"fmt"

	"github.com/hyapp/roomcell/configs"
)

// VipPlan is one VIP level on sale.
type VipPlan struct {
	Level int32
	Name  string
	// Price in COIN of one period (paid only by source vip_purchase).
	Price int64
	// DurationMs is one period.
	DurationMs int64
	// RewardResourceGroupID is echoed in VipActivated for the client; this
	// wallet grants no resources itself.
	RewardResourceGroupID int64
}

const day = 24 * 3600 * 1000

// DefaultVipPlans is the catalog of configs.DefaultVipPlans.
func DefaultVipPlans() []VipPlan { return PlansFromConfig(configs.DefaultVipPlans()) }

// PlansFromConfig turns the wallet.vip_plans config into plans.
func PlansFromConfig(cs []configs.VipPlanConfig) []VipPlan {
	out := make([]VipPlan, len(cs))
	for i, c := range cs {
		out[i] = VipPlan{Level: c.Level, Name: c.Name, Price: c.Price, DurationMs: int64(c.Days) * day, RewardResourceGroupID: c.RewardResourceGroupID}
	}
	return out
}

func giftCatalog(gs []configs.GiftConfig) (map[string]configs.GiftConfig, error) {
	m := make(map[string]configs.GiftConfig, len(gs))
	for _, g := range gs {
		if g.ID == "" || g.Price < 0 || g.Heat < 0 {
			return nil, fmt.Errorf("wallet: bad gift %+v", g)
		}
		if _, dup := m[g.ID]; dup {
			return nil, fmt.Errorf("wallet: duplicate gift %q", g.ID)
		}
		m[g.ID] = g
	}
	return m, nil
}

func vipCatalog(ps []VipPlan) (map[int32]VipPlan, error) {
	m := make(map[int32]VipPlan, len(ps))
	for _, p := range ps {
		if p.Level <= 0 || p.Price < 0 || p.DurationMs <= 0 || p.Name == "" {
			return nil, fmt.Errorf("wallet: bad VIP plan %+v", p)
		}
		if _, dup := m[p.Level]; dup {
			return nil, fmt.Errorf("wallet: duplicate VIP level %d", p.Level)
		}
		m[p.Level] = p
	}
	return m, nil
}
