package configs

import "time"

// RetentionConfig is the retention block: how long each growing
// table keeps what is finished, and how fast the purge worker deletes.
// Zero takes the default; a negative value is refused (it would not mean
// "keep nothing" and must not silently mean the default either).
type RetentionConfig struct {
	Enabled *bool `yaml:"enabled"` // default true
	// OutboxPublished: published room_outbox rows go when they were
	// created and published this long ago (default 72h).
	OutboxPublished time.Duration `yaml:"outbox_published"`
	// CommandLog: room_command_log rows go when this old and at or below
	// the room's snapshot (default 168h = 7d). It is the idempotency
	// window: a command_id retried later may be executed as a new command.
	CommandLog time.Duration `yaml:"command_log"`
	// WalletOutbox: wallet_outbox rows go when this old and passed by the
	// notice cursor (default 72h).
	WalletOutbox time.Duration `yaml:"wallet_outbox"`
	// NoticesDelivered: delivered notice_delivery_events rows go when
	// delivered this long ago (default 168h); failed ones never go.
	NoticesDelivered time.Duration `yaml:"notices_delivered"`
	// Interval between purge rounds (default 1m).
	Interval time.Duration `yaml:"interval"`
	// BatchSize: rows per DELETE statement (default and maximum 1000).
	BatchSize int `yaml:"batch_size"`
	// BatchPause: the least pause between two batches (default 20ms).
	BatchPause time.Duration `yaml:"batch_pause"`
	// RowsPerSecond caps the purge rate per table (default 5000); the
	// pause after a batch is at least rows/rate.
	RowsPerSecond int `yaml:"rows_per_second"`
	// DutyCycle is the most of the wall time the purge spends in its own
	// statements (default 0.1): after a batch that took t it pauses at
	// least t*(1-d)/d. A database busy with room commands makes every
	// batch slower, so the purge backs off by itself exactly when the
	// appends need the server; 1 turns the yield off.
	DutyCycle float64 `yaml:"duty_cycle"`
	// LeaseTTL bounds how long a go-memdb purge lease outlives a holder
	// that never releases it (default 5m; MySQL's lock dies with its
	// connection instead).
	LeaseTTL time.Duration `yaml:"lease_ttl"`
}

// MaxRetentionBatch is the most rows one purge statement may delete (the
// value of persistence.MaxPurgeBatch; configs may not import it).
const MaxRetentionBatch = 1000

// DefaultDutyCycle is retention.duty_cycle's default: measured on a
// saturated two-core MariaDB, the share that keeps room commands within
// 10% of their throughput without a purge (docs/benchmarks.md).
const DefaultDutyCycle = 0.1

// minCommandLog keeps the idempotency window longer than any client's
// retry loop.
const minCommandLog = time.Minute

// On reports whether the purge worker runs (default true).
func (c RetentionConfig) On() bool { return c.Enabled == nil || *c.Enabled }

func zeroOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (c *RetentionConfig) setDefaults() {
	c.OutboxPublished = zeroOr(c.OutboxPublished, 72*time.Hour)
	c.CommandLog = zeroOr(c.CommandLog, 7*24*time.Hour)
	c.WalletOutbox = zeroOr(c.WalletOutbox, 72*time.Hour)
	c.NoticesDelivered = zeroOr(c.NoticesDelivered, 7*24*time.Hour)
	c.Interval = zeroOr(c.Interval, time.Minute)
	if c.BatchSize == 0 {
		c.BatchSize = MaxRetentionBatch
	}
	c.BatchPause = zeroOr(c.BatchPause, 20*time.Millisecond)
	if c.RowsPerSecond == 0 {
		c.RowsPerSecond = 5000
	}
	if c.DutyCycle == 0 {
		c.DutyCycle = DefaultDutyCycle
	}
	c.LeaseTTL = zeroOr(c.LeaseTTL, 5*time.Minute)
}

// Validate checks the section as it is, applying no default; the error
// names the offending key. The purge service runs it on the section it is
// given.
func (c RetentionConfig) Validate() error {
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"retention.outbox_published", c.OutboxPublished},
		{"retention.command_log", c.CommandLog},
		{"retention.wallet_outbox", c.WalletOutbox},
		{"retention.notices_delivered", c.NoticesDelivered},
		{"retention.interval", c.Interval},
		{"retention.batch_pause", c.BatchPause},
		{"retention.lease_ttl", c.LeaseTTL},
	} {
		if d.v <= 0 {
			return errorf(d.key, "%s is not positive (zero takes the default only through Load or WithDefaults)", d.v)
		}
	}
	if c.CommandLog < minCommandLog {
		return errorf("retention.command_log", "%s is shorter than %s: it is the command_id idempotency window", c.CommandLog, minCommandLog)
	}
	if c.BatchSize < 1 || c.BatchSize > MaxRetentionBatch {
		return errorf("retention.batch_size", "%d is outside 1..%d", c.BatchSize, MaxRetentionBatch)
	}
	if c.RowsPerSecond < 1 {
		return errorf("retention.rows_per_second", "%d is not positive", c.RowsPerSecond)
	}
	if !(c.DutyCycle > 0 && c.DutyCycle <= 1) { // also refuses NaN
		return errorf("retention.duty_cycle", "%v is outside (0, 1]", c.DutyCycle)
	}
	return nil
}
