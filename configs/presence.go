package configs

import "time"

// PresenceConfig drives the presence stale worker (actors/presence) and the
// rooms' directory refresh.
type PresenceConfig struct {
	Enabled *bool `yaml:"enabled"` // default true
	// ScanInterval: how often the stale worker scans the rooms this node
	// hosts (default 5s).
	ScanInterval time.Duration `yaml:"scan_interval"`
	// StaleAfter: a member whose newest heartbeat is this old is taken out
	// of the room with LeaveRoom reason heartbeat_timeout (default 60s); a
	// user goes within stale_after + scan_interval of their last heartbeat.
	StaleAfter time.Duration `yaml:"stale_after"`
	// BatchSize caps the leaves one scan sends (default 500); the rest
	// wait for the next scan.
	BatchSize int `yaml:"batch_size"`
	// RefreshInterval: how often a live room re-registers in the directory
	// from its state (default 30s); it is also how long a directory outage
	// stays visible after the directory is back.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
}

// On reports whether the stale worker runs (default true).
func (c PresenceConfig) On() bool { return c.Enabled == nil || *c.Enabled }

func (c *PresenceConfig) setDefaults() {
	c.ScanInterval = durationOr(c.ScanInterval, 5*time.Second)
	c.StaleAfter = durationOr(c.StaleAfter, 60*time.Second)
	c.BatchSize = intOr(c.BatchSize, 500)
	c.RefreshInterval = durationOr(c.RefreshInterval, 30*time.Second)
}

// Validate checks the section as it is, applying no default; the error
// names the offending key. The stale worker runs it on the section it is
// given.
func (c PresenceConfig) Validate() error {
	if err := firstError(
		mustBePositive("presence.scan_interval", c.ScanInterval),
		mustBePositive("presence.stale_after", c.StaleAfter),
		mustBePositive("presence.batch_size", c.BatchSize),
		mustBePositive("presence.refresh_interval", c.RefreshInterval),
	); err != nil {
		return err
	}
	if c.StaleAfter < c.ScanInterval {
		return errorf("presence.stale_after", "%s is shorter than presence.scan_interval (%s)", c.StaleAfter, c.ScanInterval)
	}
	return nil
}
