package configs

import (
	"fmt"
	"time"
)

// RoomConfig tunes the room grain.
type RoomConfig struct {
	// SnapshotEvery: a snapshot is written in the same transaction as every
	// Nth command.
	SnapshotEvery int `yaml:"snapshot_every"`
	// IdleTimeout: a room with no command for this long writes a snapshot
	// and passivates.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// PublishTimeout bounds the grain's synchronous IM publish per event.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// StoreTimeout bounds one store call from the grain.
	StoreTimeout time.Duration `yaml:"store_timeout"`
}

func (c *RoomConfig) setDefaults() {
	c.SnapshotEvery = intOr(c.SnapshotEvery, 100)
	c.IdleTimeout = durationOr(c.IdleTimeout, 10*time.Minute)
	c.PublishTimeout = durationOr(c.PublishTimeout, 3*time.Second)
	c.StoreTimeout = durationOr(c.StoreTimeout, 3*time.Second)
}

func (c RoomConfig) validate() error { return nil }

// GiftConfig is one entry of the gift catalog.
type GiftConfig struct {
	ID string `yaml:"id"`
	// Price in COIN per gift.
	Price int64 `yaml:"price"`
	// Heat added to the room per gift.
	Heat int64 `yaml:"heat"`
}

// DefaultGifts is the catalog used when the file lists none.
func DefaultGifts() []GiftConfig {
	return []GiftConfig{
		{ID: "rose", Price: 10, Heat: 10},
		{ID: "heart", Price: 100, Heat: 100},
		{ID: "rocket", Price: 9900, Heat: 9900},
	}
}

func validateGifts(gs []GiftConfig) error {
	seen := map[string]bool{}
	for i, g := range gs {
		key := fmt.Sprintf("gifts[%d]", i)
		if g.ID == "" {
			return errorf(key+".id", "required")
		}
		if seen[g.ID] {
			return errorf(key+".id", "duplicate gift id %q", g.ID)
		}
		seen[g.ID] = true
		if g.Price < 0 {
			return errorf(key+".price", "must not be negative, got %d", g.Price)
		}
		if g.Heat < 0 {
			return errorf(key+".heat", "must not be negative, got %d", g.Heat)
		}
	}
	return nil
}

// WalletConfig tunes the wallet.
type WalletConfig struct {
	// DiamondPerCoin: the receiver of a gift gets price×count×ratio/100
	// DIAMOND (percent, integer arithmetic).
	DiamondPercent int64 `yaml:"diamond_percent"`
	// Addr of a remote WalletService; empty = in-process.
	Addr string `yaml:"addr"`
}

func (c *WalletConfig) setDefaults() {
	if c.DiamondPercent <= 0 {
		c.DiamondPercent = 100
	}
}

func (c WalletConfig) validate() error {
	if c.DiamondPercent > 10000 {
		return errorf("wallet.diamond_percent", "must be at most 10000, got %d", c.DiamondPercent)
	}
	return nil
}
