package configs

import (
	"fmt"
	"time"

	// The zone database inside the binary: room.ranking.zone must mean
	// the same on every node, whatever the host has installed.
	_ "time/tzdata"
)

// RoomConfig tunes the room grain.
type RoomConfig struct {
	// SnapshotEvery: a room writes its snapshot every Nth command, in a
	// store call of its own after the command's append (a snapshot that
	// fails never fails a command).
	SnapshotEvery int `yaml:"snapshot_every"`
	// SnapshotMaxBytes: a snapshot bigger than this is not written (the
	// room replays from the last one; roomcell_room_snapshot_failures_total
	// {reason="too_big"}). At most MaxSnapshotBytes, the room_snapshots
	// column; keep it under the database's max_allowed_packet.
	SnapshotMaxBytes int `yaml:"snapshot_max_bytes"`
	// IdleTimeout: a room with no command for this long writes a snapshot
	// and passivates.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// PublishTimeout bounds the grain's synchronous IM publish per event.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// StoreTimeout bounds one store call from the grain.
	StoreTimeout time.Duration `yaml:"store_timeout"`
	// StoreStallAfter: store calls of a room database in flight on a
	// node and none finished for this long is a stall; confirmed by one
	// probe (StoreProbeTimeout), it closes the node's store gate of that
	// database: its writes are refused at once (ROOM_STORE_DOWN), its
	// reads answer from memory (actors/storegate).
	StoreStallAfter time.Duration `yaml:"store_stall_after"`
	// StoreProbeTimeout bounds the store gate's probe that confirms a
	// stall or a failed call (a ping on a connection of its own).
	StoreProbeTimeout time.Duration `yaml:"store_probe_timeout"`
	// CreateGroupTimeout bounds CreateRoom's IM group step: after the
	// command is stored and before the reply. A slower or unreachable IM
	// costs the reply at most this; the RoomCreated outbox row then
	// creates the group, and the reply says im_group_ready false.
	CreateGroupTimeout time.Duration `yaml:"create_group_timeout"`
	// MaxMembers caps a room's members: a JoinRoom past it is refused
	// with RESOURCE_EXHAUSTED (ROOM_FULL); the owner always gets in.
	MaxMembers int `yaml:"max_members"`
	// PasswordKey keys the rooms' password verifiers (HMAC-SHA256; see
	// room/password.go): a secret, the same on every node, at least 32
	// bytes; from the environment ("${ROOMCELL_ROOM_PASSWORD_KEY}").
	// Empty: SetRoomPassword is refused (PASSWORDS_OFF) and a room that
	// has a password admits only its owner and admins.
	PasswordKey string `yaml:"password_key"`
	// LikeWindow: a room gathers the likes sent within this long into one
	// RoomLiked (one log row, one IM message) and answers them when it is
	// stored: a like's reply comes up to this late, and a liked room sends
	// at most one like message per window.
	LikeWindow time.Duration `yaml:"like_window"`
	// Ranking: the contribution ranking (room/ranking.go).
	Ranking RankingConfig `yaml:"ranking"`
}

// RankingConfig tunes the rooms' contribution ranking.
type RankingConfig struct {
	// Zone: the time zone whose calendar days the day ranking counts
	// (an IANA name such as "Asia/Shanghai"); empty is UTC. Every node
	// must have the same: the day a gift counts for is decided by the
	// node that decides the gift.
	Zone string `yaml:"zone"`
}

func (c *RoomConfig) setDefaults() {
	c.SnapshotEvery = intOr(c.SnapshotEvery, 100)
	c.SnapshotMaxBytes = intOr(c.SnapshotMaxBytes, DefaultSnapshotMaxBytes)
	c.IdleTimeout = durationOr(c.IdleTimeout, 10*time.Minute)
	c.PublishTimeout = durationOr(c.PublishTimeout, 3*time.Second)
	c.StoreTimeout = durationOr(c.StoreTimeout, 3*time.Second)
	c.StoreStallAfter = durationOr(c.StoreStallAfter, DefaultStoreStallAfter)
	c.StoreProbeTimeout = durationOr(c.StoreProbeTimeout, DefaultStoreProbeTimeout)
	c.CreateGroupTimeout = durationOr(c.CreateGroupTimeout, time.Second)
	c.MaxMembers = intOr(c.MaxMembers, DefaultMaxMembers)
	c.LikeWindow = durationOr(c.LikeWindow, DefaultLikeWindow)
}

// DefaultLikeWindow is room.like_window when the file sets none; the
// window is between MinLikeWindow (IM: a liked room's messages stay far
// under Tencent's 40 a second per group) and MaxLikeWindow (a like's
// reply waits this long at most).
const (
	DefaultLikeWindow = 500 * time.Millisecond
	MinLikeWindow     = 100 * time.Millisecond
	MaxLikeWindow     = 5 * time.Second
)

// Defaults of room.store_stall_after and room.store_probe_timeout: the
// gate closes about their sum after a database stops answering. Each is
// at least MinStoreGateWait (shorter, a busy store that answers would be
// taken for a stalled one) and under room.store_timeout (longer, the
// calls would time out before the gate noticed).
const (
	DefaultStoreStallAfter   = 200 * time.Millisecond
	DefaultStoreProbeTimeout = 150 * time.Millisecond
	MinStoreGateWait         = 20 * time.Millisecond
)

// DefaultMaxMembers is room.max_members when the file sets none.
const DefaultMaxMembers = 100_000

// MinPasswordKeyLen is the shortest room.password_key: a short key would
// let anyone who reads a room's events guess its password offline.
const MinPasswordKeyLen = 32

// DefaultSnapshotMaxBytes is room.snapshot_max_bytes when the file sets
// none: under MariaDB's default max_allowed_packet (16 MiB) with room
// for the statement around it.
const DefaultSnapshotMaxBytes = 15 << 20

// MaxSnapshotBytes is the most the room_snapshots.state column holds
// (MEDIUMBLOB).
const MaxSnapshotBytes = 1<<24 - 1

func (c RoomConfig) validate() error {
	if c.SnapshotMaxBytes < 0 || c.SnapshotMaxBytes > MaxSnapshotBytes {
		return errorf("room.snapshot_max_bytes", "must be between 1 and %d (the room_snapshots column), got %d", MaxSnapshotBytes, c.SnapshotMaxBytes)
	}
	for _, k := range []struct {
		key string
		d   time.Duration
	}{{"room.store_stall_after", c.StoreStallAfter}, {"room.store_probe_timeout", c.StoreProbeTimeout}} {
		if k.d < MinStoreGateWait || k.d >= c.StoreTimeout {
			return errorf(k.key, "must be at least %s and under room.store_timeout (%s), got %s", MinStoreGateWait, c.StoreTimeout, k.d)
		}
	}
	if c.LikeWindow < MinLikeWindow || c.LikeWindow > MaxLikeWindow {
		return errorf("room.like_window", "must be between %s and %s, got %s", MinLikeWindow, MaxLikeWindow, c.LikeWindow)
	}
	if n := len(c.PasswordKey); n > 0 && n < MinPasswordKeyLen {
		return errorf("room.password_key", "must be at least %d bytes, got %d", MinPasswordKeyLen, n)
	}
	if z := c.Ranking.Zone; z != "" {
		// "Local" would make the day depend on each node's own setting.
		if _, err := time.LoadLocation(z); err != nil || z == "Local" {
			return errorf("room.ranking.zone", "must be an IANA time zone name such as Asia/Shanghai (or empty for UTC), got %q", z)
		}
	}
	return nil
}

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
	// AuthToken is the operator token sent to the remote wallet (the gift
	// RPCs are operator-only). Use ${ENV}.
	AuthToken string `yaml:"auth_token"`
	// TLS to the remote wallet.
	TLS ClientTLSConfig `yaml:"tls"`
	// VipPlans is the VIP catalog: one entry per level on sale.
	VipPlans []VipPlanConfig `yaml:"vip_plans"`
	// GiftReconciler settles gift reservations nobody settled
	// (actors/wallet/giftsettle). It runs on room nodes, over the wallet in
	// process or at Addr.
	GiftReconciler GiftReconcilerConfig `yaml:"gift_reconciler"`
}

// GiftReconcilerConfig tunes the gift reconciler.
type GiftReconcilerConfig struct {
	Enabled *bool `yaml:"enabled"` // default true
	// SettleAfter: an open reservation older than this is settled by the
	// reconciler (the room's void fence keeps any value correct; shorter
	// only refunds gifts a slow room write would still have delivered).
	SettleAfter  time.Duration `yaml:"settle_after"`
	PollInterval time.Duration `yaml:"poll_interval"`
	BatchSize    int           `yaml:"batch_size"`
	// ParkAfter: a reservation whose settlement failed this many times is
	// parked in the wallet store (no node's reconciler tries it again,
	// across restarts; roomcell_wallet_gift_holds_parked, an ERROR line) for an
	// operator to resolve from any node; MaxBackoff caps the wait between
	// its tries (poll_interval doubled per failure).
	ParkAfter  int           `yaml:"park_after"`
	MaxBackoff time.Duration `yaml:"max_backoff"`
}

// On reports whether the reconciler runs.
func (c GiftReconcilerConfig) On() bool { return c.Enabled == nil || *c.Enabled }

func (c *GiftReconcilerConfig) setDefaults() {
	c.SettleAfter = durationOr(c.SettleAfter, 30*time.Second)
	c.PollInterval = durationOr(c.PollInterval, 5*time.Second)
	c.BatchSize = intOr(c.BatchSize, 100)
	c.ParkAfter = intOr(c.ParkAfter, 10)
	c.MaxBackoff = durationOr(c.MaxBackoff, 5*time.Minute)
}

// Validate checks the section as it is, applying no default; the error
// names the offending key. The reconciler runs it on the section it is
// given.
func (c GiftReconcilerConfig) Validate() error {
	return firstError(
		mustBePositive("wallet.gift_reconciler.settle_after", c.SettleAfter),
		mustBePositive("wallet.gift_reconciler.poll_interval", c.PollInterval),
		mustBePositive("wallet.gift_reconciler.batch_size", c.BatchSize),
		mustBePositive("wallet.gift_reconciler.park_after", c.ParkAfter),
		mustBePositive("wallet.gift_reconciler.max_backoff", c.MaxBackoff),
	)
}

// VipPlanConfig is one VIP level on sale.
type VipPlanConfig struct {
	Level int32  `yaml:"level"`
	Name  string `yaml:"name"`
	// Price in COIN of one period (charged only for source vip_purchase).
	Price int64 `yaml:"price"`
	// Days in one period.
	Days int `yaml:"days"`
	// RewardResourceGroupID is echoed in VipActivated for the client.
	RewardResourceGroupID int64 `yaml:"reward_resource_group_id"`
}

// DefaultVipPlans is the catalog used when the file lists none: VIP1..VIP6,
// 30 days each (seed 003's example is VIP6 for 30 days).
func DefaultVipPlans() []VipPlanConfig {
	prices := []int64{1_000, 3_000, 6_000, 10_000, 30_000, 60_000}
	out := make([]VipPlanConfig, len(prices))
	for i, p := range prices {
		lvl := int32(i + 1)
		out[i] = VipPlanConfig{Level: lvl, Name: fmt.Sprintf("VIP%d", lvl), Price: p, Days: 30, RewardResourceGroupID: 100 + int64(lvl)}
	}
	return out
}

func (c *WalletConfig) setDefaults() {
	if c.DiamondPercent <= 0 {
		c.DiamondPercent = 100
	}
	c.GiftReconciler.setDefaults()
	if c.VipPlans == nil {
		c.VipPlans = DefaultVipPlans()
	}
}

func (c WalletConfig) validate() error {
	if err := c.GiftReconciler.Validate(); err != nil {
		return err
	}
	if c.DiamondPercent > 10000 {
		return errorf("wallet.diamond_percent", "must be at most 10000, got %d", c.DiamondPercent)
	}
	seen := map[int32]bool{}
	for i, p := range c.VipPlans {
		key := fmt.Sprintf("wallet.vip_plans[%d]", i)
		switch {
		case p.Level <= 0:
			return errorf(key+".level", "must be positive, got %d", p.Level)
		case seen[p.Level]:
			return errorf(key+".level", "duplicate level %d", p.Level)
		case p.Name == "":
			return errorf(key+".name", "required")
		case p.Price < 0:
			return errorf(key+".price", "must not be negative, got %d", p.Price)
		case p.Days <= 0:
			return errorf(key+".days", "must be positive, got %d", p.Days)
		}
		seen[p.Level] = true
	}
	return nil
}
