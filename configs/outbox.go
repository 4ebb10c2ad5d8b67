package configs

import "time"

// Retry strategies of the outbox relay.
const (
	RetryFixedInterval = "fixed_interval"
	RetryExponential   = "exponential"
)

// OutboxWorkerConfig is seed 000's outbox_worker block, plus the lease and
// the exponential strategy.
type OutboxWorkerConfig struct {
	Enabled        *bool         `yaml:"enabled"` // default true
	PollInterval   time.Duration `yaml:"poll_interval"`
	BatchSize      int           `yaml:"batch_size"`
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	RetryStrategy  string        `yaml:"retry_strategy"`
	// LeaseTTL: how long a claimed row is reserved for this relay.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// MaxBackoff caps the exponential strategy's delay.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// HotRoomBatch caps the relay's claim while one room has a backlog:
	// after a full claim that one room filled at least half of, the next
	// claim doubles, up to this many rows (default max(2000, batch_size);
	// batch_size keeps the claim fixed). Keep it drainable well within
	// publish_timeout: a room's claim is queued at once, 50 events per
	// coalesced message at Tencent's 40 messages/s per group.
	HotRoomBatch int `yaml:"hot_room_batch"`
}

// On reports whether the relay runs (default true).
func (c OutboxWorkerConfig) On() bool { return c.Enabled == nil || *c.Enabled }

func (c *OutboxWorkerConfig) setDefaults() {
	c.PollInterval = durationOr(c.PollInterval, time.Second)
	c.BatchSize = intOr(c.BatchSize, 100)
	c.PublishTimeout = durationOr(c.PublishTimeout, 3*time.Second)
	if c.RetryStrategy == "" {
		c.RetryStrategy = RetryFixedInterval
	}
	c.LeaseTTL = durationOr(c.LeaseTTL, 10*time.Second)
	c.MaxBackoff = durationOr(c.MaxBackoff, 5*time.Minute)
	c.HotRoomBatch = intOr(c.HotRoomBatch, max(2000, c.BatchSize))
}

// Validate checks the section as it is, applying no default; the error
// names the offending key like Load's do. The relay and the MQ fanout run
// it on the section they are given.
func (c OutboxWorkerConfig) Validate() error {
	if err := firstError(
		mustBePositive("outbox_worker.poll_interval", c.PollInterval),
		mustBePositive("outbox_worker.batch_size", c.BatchSize),
		mustBePositive("outbox_worker.publish_timeout", c.PublishTimeout),
		mustBePositive("outbox_worker.max_backoff", c.MaxBackoff),
	); err != nil {
		return err
	}
	switch c.RetryStrategy {
	case RetryFixedInterval, RetryExponential:
	default:
		return errorf("outbox_worker.retry_strategy", "unknown strategy %q (want fixed_interval or exponential)", c.RetryStrategy)
	}
	if c.HotRoomBatch < c.BatchSize {
		return errorf("outbox_worker.hot_room_batch", "%d must be at least outbox_worker.batch_size (%d)", c.HotRoomBatch, c.BatchSize)
	}
	if c.LeaseTTL <= c.PublishTimeout {
		return errorf("outbox_worker.lease_ttl", "%s must be longer than outbox_worker.publish_timeout (%s)", c.LeaseTTL, c.PublishTimeout)
	}
	return nil
}
