package configs

import "time"

// PresenceConfig drives the presence stale worker.
type PresenceConfig struct {
	Enabled      *bool         `yaml:"enabled"` // default true
	ScanInterval time.Duration `yaml:"scan_interval"`
	StaleAfter   time.Duration `yaml:"stale_after"`
	BatchSize    int           `yaml:"batch_size"`
	// RefreshInterval: how often a live room re-registers in the directory.
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

func (c PresenceConfig) validate() error {
	if c.StaleAfter < c.ScanInterval {
		return errorf("presence.stale_after", "%s is shorter than presence.scan_interval (%s)", c.StaleAfter, c.ScanInterval)
	}
	return nil
}
