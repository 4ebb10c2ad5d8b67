package configs

import (
	"strings"
	"testing"
	"time"
)

func TestRetentionDefaults(t *testing.T) {
	c, err := Parse([]byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Retention
	if !r.On() || r.OutboxPublished != 72*time.Hour || r.CommandLog != 7*24*time.Hour || r.WalletOutbox != 72*time.Hour ||
		r.NoticesDelivered != 7*24*time.Hour || r.BatchSize != MaxRetentionBatch || r.RowsPerSecond != 5000 || r.DutyCycle != 0.1 {
		t.Fatalf("retention defaults %+v differ from the documented defaults", r)
	}
}

func TestRetentionBadValuesNameTheKey(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"retention: {outbox_published: -1h}", "retention.outbox_published"},
		{"retention: {command_log: 30s}", "retention.command_log"},
		{"retention: {command_log: -5m}", "retention.command_log"},
		{"retention: {wallet_outbox: -1s}", "retention.wallet_outbox"},
		{"retention: {notices_delivered: -1s}", "retention.notices_delivered"},
		{"retention: {batch_size: 1001}", "retention.batch_size"},
		{"retention: {batch_size: -1}", "retention.batch_size"},
		{"retention: {rows_per_second: -3}", "retention.rows_per_second"},
		{"retention: {interval: -1m}", "retention.interval"},
		{"retention: {batch_pause: -1ms}", "retention.batch_pause"},
		{"retention: {lease_ttl: -1m}", "retention.lease_ttl"},
		{"retention: {duty_cycle: -0.5}", "retention.duty_cycle"},
		{"retention: {duty_cycle: 1.5}", "retention.duty_cycle"},
		{"retention: {duty_cycle: .nan}", "retention.duty_cycle"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: got %v, want an error naming %s", tc.yaml, err, tc.key)
		}
	}
}
