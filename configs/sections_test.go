package configs

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// The defaults a hand-built section takes from WithDefaults are the ones
// Load applies: one source, so a test's section and a node's agree.
func TestWithDefaultsAreTheLoadersDefaults(t *testing.T) {
	c, err := Parse([]byte("node_id: n1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := WithDefaults(OutboxWorkerConfig{}); got != c.OutboxWorker {
		t.Errorf("outbox_worker: WithDefaults %+v, Load %+v", got, c.OutboxWorker)
	}
	if got := WithDefaults(PresenceConfig{}); !reflect.DeepEqual(got, c.Presence) {
		t.Errorf("presence: WithDefaults %+v, Load %+v", got, c.Presence)
	}
	if got := WithDefaults(NoticeWorkerConfig{}); got != c.Notice.WalletNoticeWorker || got != c.Notice.RoomNoticeWorker {
		t.Errorf("notice workers: WithDefaults %+v, Load %+v / %+v", got, c.Notice.WalletNoticeWorker, c.Notice.RoomNoticeWorker)
	}
	if got := WithDefaults(RetentionConfig{}); got != c.Retention {
		t.Errorf("retention: WithDefaults %+v, Load %+v", got, c.Retention)
	}
	if got := WithDefaults(GiftReconcilerConfig{}); got != c.Wallet.GiftReconciler {
		t.Errorf("wallet.gift_reconciler: WithDefaults %+v, Load %+v", got, c.Wallet.GiftReconciler)
	}
	// A value set by hand is kept; only the unset ones are filled.
	if got := WithDefaults(OutboxWorkerConfig{BatchSize: 7}); got.BatchSize != 7 || got.PollInterval != c.OutboxWorker.PollInterval {
		t.Errorf("WithDefaults overwrote a set value or left an unset one: %+v", got)
	}
}

// A worker section built in code with a field left unset is refused by
// Validate, naming the key: the worker fails closed instead of running
// with a zero interval or batch, or quietly taking a default of its own.
func TestValidateRefusesUnsetFields(t *testing.T) {
	cases := []struct {
		key   string
		check func() error
	}{
		{"outbox_worker.poll_interval", func() error { c := WithDefaults(OutboxWorkerConfig{}); c.PollInterval = 0; return c.Validate() }},
		{"outbox_worker.batch_size", func() error { c := WithDefaults(OutboxWorkerConfig{}); c.BatchSize = 0; return c.Validate() }},
		{"outbox_worker.publish_timeout", func() error { c := WithDefaults(OutboxWorkerConfig{}); c.PublishTimeout = 0; return c.Validate() }},
		{"outbox_worker.max_backoff", func() error { c := WithDefaults(OutboxWorkerConfig{}); c.MaxBackoff = 0; return c.Validate() }},
		{"outbox_worker.retry_strategy", func() error { c := WithDefaults(OutboxWorkerConfig{}); c.RetryStrategy = ""; return c.Validate() }},
		{"outbox_worker.lease_ttl", func() error { c := WithDefaults(OutboxWorkerConfig{}); c.LeaseTTL = 0; return c.Validate() }},
		{"outbox_worker.hot_room_batch", func() error { c := WithDefaults(OutboxWorkerConfig{}); c.HotRoomBatch = 0; return c.Validate() }},
		{"outbox_worker.poll_interval", func() error { return OutboxWorkerConfig{}.Validate() }},
		{"presence.scan_interval", func() error { c := WithDefaults(PresenceConfig{}); c.ScanInterval = 0; return c.Validate() }},
		{"presence.stale_after", func() error { c := WithDefaults(PresenceConfig{}); c.StaleAfter = 0; return c.Validate() }},
		{"presence.batch_size", func() error { c := WithDefaults(PresenceConfig{}); c.BatchSize = 0; return c.Validate() }},
		{"presence.refresh_interval", func() error { c := WithDefaults(PresenceConfig{}); c.RefreshInterval = 0; return c.Validate() }},
		{"presence.scan_interval", func() error { return PresenceConfig{}.Validate() }},
		{"notice.w.poll_interval", func() error {
			c := WithDefaults(NoticeWorkerConfig{})
			c.PollInterval = 0
			return c.Validate("notice.w")
		}},
		{"notice.w.batch_size", func() error {
			c := WithDefaults(NoticeWorkerConfig{})
			c.BatchSize = 0
			return c.Validate("notice.w")
		}},
		{"notice.w.lock_ttl", func() error { c := WithDefaults(NoticeWorkerConfig{}); c.LockTTL = 0; return c.Validate("notice.w") }},
		{"notice.w.max_retry_count", func() error {
			c := WithDefaults(NoticeWorkerConfig{})
			c.MaxRetryCount = 0
			return c.Validate("notice.w")
		}},
		{"notice.w.max_backoff", func() error {
			c := WithDefaults(NoticeWorkerConfig{})
			c.MaxBackoff = 0
			return c.Validate("notice.w")
		}},
		{"notice.w.send_timeout", func() error {
			c := WithDefaults(NoticeWorkerConfig{})
			c.SendTimeout = 0
			return c.Validate("notice.w")
		}},
		{"notice.w.send_concurrency", func() error {
			c := WithDefaults(NoticeWorkerConfig{})
			c.SendConcurrency = 0
			return c.Validate("notice.w")
		}},
		{"notice.w.poll_interval", func() error { return NoticeWorkerConfig{}.Validate("notice.w") }},
		{"retention.outbox_published", func() error { c := WithDefaults(RetentionConfig{}); c.OutboxPublished = 0; return c.Validate() }},
		{"retention.interval", func() error { c := WithDefaults(RetentionConfig{}); c.Interval = 0; return c.Validate() }},
		{"retention.batch_pause", func() error { c := WithDefaults(RetentionConfig{}); c.BatchPause = 0; return c.Validate() }},
		{"retention.lease_ttl", func() error { c := WithDefaults(RetentionConfig{}); c.LeaseTTL = 0; return c.Validate() }},
		{"retention.batch_size", func() error { c := WithDefaults(RetentionConfig{}); c.BatchSize = 0; return c.Validate() }},
		{"retention.rows_per_second", func() error { c := WithDefaults(RetentionConfig{}); c.RowsPerSecond = 0; return c.Validate() }},
		{"retention.duty_cycle", func() error { c := WithDefaults(RetentionConfig{}); c.DutyCycle = 0; return c.Validate() }},
		{"retention.outbox_published", func() error { return RetentionConfig{}.Validate() }},
		{"wallet.gift_reconciler.settle_after", func() error { c := WithDefaults(GiftReconcilerConfig{}); c.SettleAfter = 0; return c.Validate() }},
		{"wallet.gift_reconciler.poll_interval", func() error { c := WithDefaults(GiftReconcilerConfig{}); c.PollInterval = 0; return c.Validate() }},
		{"wallet.gift_reconciler.batch_size", func() error { c := WithDefaults(GiftReconcilerConfig{}); c.BatchSize = 0; return c.Validate() }},
		{"wallet.gift_reconciler.park_after", func() error { c := WithDefaults(GiftReconcilerConfig{}); c.ParkAfter = 0; return c.Validate() }},
		{"wallet.gift_reconciler.max_backoff", func() error {
			c := WithDefaults(GiftReconcilerConfig{})
			c.MaxBackoff = -time.Second
			return c.Validate()
		}},
		{"wallet.gift_reconciler.settle_after", func() error { return GiftReconcilerConfig{}.Validate() }},
	}
	for _, tc := range cases {
		err := tc.check()
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("want an error naming %s, got %v", tc.key, err)
		}
	}
	// The defaults themselves pass, so the checks refuse only what is unset.
	for name, err := range map[string]error{
		"outbox_worker":          WithDefaults(OutboxWorkerConfig{}).Validate(),
		"presence":               WithDefaults(PresenceConfig{}).Validate(),
		"notice worker":          WithDefaults(NoticeWorkerConfig{}).Validate("notice.w"),
		"retention":              WithDefaults(RetentionConfig{}).Validate(),
		"wallet.gift_reconciler": WithDefaults(GiftReconcilerConfig{}).Validate(),
	} {
		if err != nil {
			t.Errorf("%s defaults refused: %v", name, err)
		}
	}
}
