package configs

import (
	"fmt"
	"os"
	"time"
)

// Config is the whole configuration of one roomcell process.
type Config struct {
	// NodeID names this process in logs, leases and metrics. Default: the
	// host name.
	NodeID string `yaml:"node_id"`
	// Roles this process runs: room, wallet, relay, notice. Default: all
	// but notice.
	Roles []string `yaml:"roles"`
	// AllowInsecure lets a gRPC listener that reaches beyond loopback
	// start without client tokens, operator tokens or TLS (OpenDoors);
	// the node then says so at WARN at start and every hour. Default
	// false: such a node refuses to start, naming the missing key.
	AllowInsecure bool `yaml:"allow_insecure"`

	Log          LogConfig          `yaml:"log"`
	GRPC         GRPCConfig         `yaml:"grpc"`
	HTTP         HTTPConfig         `yaml:"http"`
	Store        StoreConfig        `yaml:"store"`
	MySQL        MySQLConfig        `yaml:"mysql"`
	Redis        RedisConfig        `yaml:"redis"`
	Room         RoomConfig         `yaml:"room"`
	Gifts        []GiftConfig       `yaml:"gifts"`
	Wallet       WalletConfig       `yaml:"wallet"`
	OutboxWorker OutboxWorkerConfig `yaml:"outbox_worker"`
	TencentIM    TencentIMConfig    `yaml:"tencent_im"`
	TRTC         TRTCConfig         `yaml:"trtc"`
	Cluster      ClusterConfig      `yaml:"cluster"`
	Presence     PresenceConfig     `yaml:"presence"`
	Directory    DirectoryConfig    `yaml:"directory"`
	Notice       NoticeConfig       `yaml:"notice"`
	Retention    RetentionConfig    `yaml:"retention"`
	Runtime      RuntimeConfig      `yaml:"runtime"`
	Watch        WatchConfig        `yaml:"watch"`
	Gateway      GatewayConfig      `yaml:"gateway"`
	RateLimits   RateLimitConfig    `yaml:"rate_limits"`
	Tracing      TracingConfig      `yaml:"tracing"`
}

// Role names.
const (
	RoleRoom   = "room"
	RoleWallet = "wallet"
	RoleRelay  = "relay"
	RoleNotice = "notice"
)

// Error is a configuration error; Key names the offending key in dotted
// form ("outbox_worker.retry_strategy").
type Error struct {
	Key string
	Msg string
}

func (e *Error) Error() string { return "config: " + e.Key + ": " + e.Msg }

func errorf(key, format string, args ...any) error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Default returns the configuration used when no file is given: the
// embedded dev setup (go-memdb, fake IM, single node).
func Default() Config {
	return WithDefaults(Config{})
}

// HasRole reports whether the process runs role.
func (c Config) HasRole(role string) bool {
	for _, r := range c.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// Load reads, expands, decodes, defaults and validates a YAML file.
// Unknown keys are errors: a misspelt key must not silently fall back to a
// default.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(b)
}

// Parse is Load on bytes.
func Parse(b []byte) (Config, error) {
	return Build(Layers{File: b})
}

func (c *Config) setDefaults() {
	if c.NodeID == "" {
		c.NodeID, _ = os.Hostname()
		if c.NodeID == "" {
			c.NodeID = "node-1"
		}
	}
	if len(c.Roles) == 0 {
		c.Roles = []string{RoleRoom, RoleWallet, RoleRelay}
	}
	c.Log.setDefaults()
	c.GRPC.setDefaults()
	c.HTTP.setDefaults()
	c.Store.setDefaults()
	c.MySQL.setDefaults()
	c.Redis.setDefaults()
	c.Room.setDefaults()
	if c.Gifts == nil {
		c.Gifts = DefaultGifts()
	}
	c.Wallet.setDefaults()
	c.OutboxWorker.setDefaults()
	c.TencentIM.setDefaults()
	c.TRTC.setDefaults()
	c.Cluster.setDefaults()
	c.Presence.setDefaults()
	c.Directory.setDefaults(c.Presence)
	c.Notice.setDefaults()
	c.Retention.setDefaults()
	c.Runtime.setDefaults()
	c.Watch.setDefaults()
	c.Gateway.setDefaults()
	c.RateLimits.setDefaults()
}

// Validate checks every section; the first error names its key.
func (c Config) Validate() error {
	for i, r := range c.Roles {
		switch r {
		case RoleRoom, RoleWallet, RoleRelay, RoleNotice:
		default:
			return errorf(fmt.Sprintf("roles[%d]", i), "unknown role %q (want room, wallet, relay or notice)", r)
		}
	}
	checks := []func() error{
		c.Log.validate, c.GRPC.validate, c.HTTP.validate, c.Store.validate,
		c.MySQL.validate, c.Redis.validate, c.Room.validate,
		func() error { return validateGifts(c.Gifts) },
		c.Wallet.validate, c.OutboxWorker.Validate, c.TencentIM.validate, c.TRTC.validate,
		c.Cluster.validate, c.Presence.Validate, func() error { return c.Directory.validate(c.Presence) }, c.Notice.validate,
		func() error { return c.Wallet.TLS.validate("wallet.tls") },
		c.Cluster.TLS.validate,
		c.Retention.Validate, c.Runtime.validate, c.Watch.validate,
		func() error { return c.Gateway.validate(c.GRPC) },
		c.RateLimits.validate, c.Tracing.validate,
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	if err := c.presenceSource(); err != nil {
		return err
	}
	if c.Store.Kind == StoreMySQL && c.MySQL.DSN == "" {
		return errorf("mysql.dsn", "required when store.kind is mysql")
	}
	if _, err := c.RoomShardMap(); err != nil {
		return err
	}
	return nil
}

// presenceSource refuses a presence source whose callbacks are off: no
// member would ever be taken out.
func (c Config) presenceSource() error {
	switch {
	case c.Presence.Source == PresenceIM && !c.TencentIM.Callback.Enabled:
		return errorf("presence.source", "im needs tencent_im.callback.enabled: without IM's callbacks no member would ever be taken out")
	case c.Presence.Source == PresenceTRTC && !c.TRTC.Callback.Enabled:
		return errorf("presence.source", "trtc needs trtc.callback.enabled: without TRTC's callbacks no member would ever be taken out")
	}
	return nil
}

// durationOr returns d, or def when d <= 0 (seed 000: a non-positive
// interval falls back to the default instead of busy-looping).
func durationOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func intOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
