package configs

import "time"

// TencentIMConfig: when Enabled is false the process publishes to the
// fake IM (dev) instead of Tencent.
type TencentIMConfig struct {
	Enabled bool `yaml:"enabled"`
	// AllowFake lets a node with the MySQL store or the etcd provider run
	// on the fake IM while Enabled is false; without it such a node
	// refuses to start. The memdb, single-node dev setup needs no flag.
	AllowFake       bool   `yaml:"allow_fake"`
	SDKAppID        int64  `yaml:"sdk_app_id"`
	SecretKey       string `yaml:"secret_key"` // use ${TENCENT_IM_SECRET_KEY}; never logged
	AdminIdentifier string `yaml:"admin_identifier"`
	BaseURL         string `yaml:"base_url"`
	// Timeout per HTTP call; above Tencent's own 3 s server timeout.
	Timeout time.Duration `yaml:"timeout"`
	// RatePerSecond per API (Tencent default 200).
	RatePerSecond int `yaml:"rate_per_second"`
	// GroupRatePerSecond per group (Tencent: 40); the client sends at 95%
	// of it and keeps at most this many sends in flight or answered within
	// the last second, so arrivals in any second stay within it.
	GroupRatePerSecond int `yaml:"group_rate_per_second"`
	// GroupType of room groups (AVChatRoom by default).
	GroupType string `yaml:"group_type"`
	// FromAccount shown as the sender of room and notice messages; empty =
	// the admin identifier.
	FromAccount string `yaml:"from_account"`
	// UserSigTTL: validity of the admin UserSig; renewed at half-life.
	UserSigTTL time.Duration `yaml:"usersig_ttl"`
	// BatchFormat of the messages that carry several room events of a busy
	// room: "compact" (room_events_compact, ~3x the events per message) or
	// "envelopes" (room_events, full envelopes: for clients that do not
	// read the compact form yet). docs/client-protocol.md has both.
	BatchFormat string `yaml:"batch_format"`
	// Callback: the endpoint of IM's third-party callbacks (callbacks.go).
	Callback IMCallbackConfig `yaml:"callback"`
	// BanReconcileInterval: how often each room node puts the IM groups
	// of the rooms it hosts back in line with the rooms' bans (the repair
	// roomctl im reconcile-bans runs for one room; one
	// get_group_ban_member call per room and round). 0 (the default): off;
	// else at least 1m.
	BanReconcileInterval time.Duration `yaml:"ban_reconcile_interval"`
}

// WithDefaults is c with every key left zero at its default, as a loaded
// config has it: what the IM client gives a hand-built config (tests,
// dev), so the defaults are written here only.
func (c TencentIMConfig) WithDefaults() TencentIMConfig {
	c.setDefaults()
	return c
}

func (c *TencentIMConfig) setDefaults() {
	if c.BaseURL == "" {
		c.BaseURL = "https://console.tim.qq.com"
	}
	if c.AdminIdentifier == "" {
		c.AdminIdentifier = "administrator"
	}
	c.Timeout = durationOr(c.Timeout, 4*time.Second)
	c.RatePerSecond = intOr(c.RatePerSecond, 200)
	c.GroupRatePerSecond = intOr(c.GroupRatePerSecond, 40)
	if c.GroupType == "" {
		c.GroupType = "AVChatRoom"
	}
	c.UserSigTTL = durationOr(c.UserSigTTL, 24*time.Hour)
	if c.BatchFormat == "" {
		c.BatchFormat = "compact"
	}
	c.Callback.setDefaults()
}

func (c TencentIMConfig) validate() error {
	// Checked also while IM is off, so a typo shows before it is turned on.
	if c.BatchFormat != "compact" && c.BatchFormat != "envelopes" {
		return errorf("tencent_im.batch_format", "must be compact or envelopes, got %q", c.BatchFormat)
	}
	if err := c.Callback.validate(); err != nil {
		return err
	}
	if c.BanReconcileInterval < 0 || c.BanReconcileInterval > 0 && c.BanReconcileInterval < time.Minute {
		return errorf("tencent_im.ban_reconcile_interval", "0 (off) or at least 1m, got %s", c.BanReconcileInterval)
	}
	if !c.Enabled {
		return nil
	}
	if c.SDKAppID <= 0 {
		return errorf("tencent_im.sdk_app_id", "required when tencent_im.enabled is true")
	}
	if c.SecretKey == "" {
		return errorf("tencent_im.secret_key", "required when tencent_im.enabled is true (set it from the environment: \"${TENCENT_IM_SECRET_KEY}\")")
	}
	// At or below Tencent's own 3 s the client gives up on calls Tencent
	// may still apply, turning slow successes into duplicates.
	if c.Timeout <= 3*time.Second {
		return errorf("tencent_im.timeout", "must be above Tencent's 3s server timeout, got %s", c.Timeout)
	}
	switch c.GroupType {
	case "Private", "Work", "Public", "ChatRoom", "Meeting", "AVChatRoom", "Community":
	default:
		return errorf("tencent_im.group_type", "unknown group type %q", c.GroupType)
	}
	if c.UserSigTTL < time.Minute {
		return errorf("tencent_im.usersig_ttl", "must be at least 1m, got %s", c.UserSigTTL)
	}
	return nil
}
