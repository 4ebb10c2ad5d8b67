package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// Seed 000: an unknown retry_strategy fails start with an error naming the
// key, through the config file and through Start.
func TestUnknownStrategyRejected(t *testing.T) {
	_, err := configs.Parse([]byte("outbox_worker:\n  retry_strategy: linear\n"))
	var ce *configs.Error
	if !errors.As(err, &ce) || ce.Key != "outbox_worker.retry_strategy" {
		t.Fatalf("Parse: %v, want a config error on outbox_worker.retry_strategy", err)
	}
	for _, ok := range []string{"", "fixed_interval", "exponential"} {
		if _, err := configs.Parse([]byte("outbox_worker:\n  retry_strategy: \"" + ok + "\"\n")); err != nil {
			t.Fatalf("strategy %q rejected: %v", ok, err)
		}
	}

	deps := Deps{Store: newMemDB(t), Publisher: newPublisher(nil), NodeID: "n1",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.RetryStrategy = "linear" })}
	_, err = Start(newSupervisor(t, newSystem(t), "workers"), deps)
	if !errors.As(err, &ce) || ce.Key != "outbox_worker.retry_strategy" {
		t.Fatalf("Start: %v, want a config error on outbox_worker.retry_strategy", err)
	}
	if _, err := ProcessBatch(context.Background(), deps); !errors.As(err, &ce) {
		t.Fatalf("ProcessBatch: %v, want the config error", err)
	}
}

// Seed 000: a non-positive poll_interval, batch_size or publish_timeout
// in the file falls back to the default instead of busy-looping or
// scanning everything; the loader applies it. A section built in code with
// such a field unset is refused by the relay and the MQ fanout, naming the
// key, instead of being defaulted a second time.
func TestNonPositiveConfigFallsBack(t *testing.T) {
	loaded, err := configs.Parse([]byte("outbox_worker: {poll_interval: -1s, batch_size: 0, publish_timeout: -1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := loaded.OutboxWorker
	if c.PollInterval != time.Second || c.BatchSize != 100 || c.PublishTimeout != 3*time.Second || c.RetryStrategy != configs.RetryFixedInterval || !c.On() {
		t.Fatalf("defaults = %+v", c)
	}
	for _, tc := range []struct {
		key   string
		unset func(*configs.OutboxWorkerConfig)
	}{
		{"outbox_worker.poll_interval", func(c *configs.OutboxWorkerConfig) { c.PollInterval = 0 }},
		{"outbox_worker.batch_size", func(c *configs.OutboxWorkerConfig) { c.BatchSize = 0 }},
		{"outbox_worker.publish_timeout", func(c *configs.OutboxWorkerConfig) { c.PublishTimeout = -time.Second }},
	} {
		cfg := testConfig()
		tc.unset(&cfg)
		s := newMemDB(t)
		var ce *configs.Error
		deps := Deps{Store: s, Publisher: newPublisher(nil), NodeID: "n1", Config: cfg}
		if _, err := Start(newSupervisor(t, newSystem(t), "workers"), deps); !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("Start: %v, want a config error on %s", err, tc.key)
		}
		if _, err := ProcessBatch(context.Background(), deps); !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("ProcessBatch: %v, want a config error on %s", err, tc.key)
		}
		mq := MQDeps{Store: s, MQ: newFakeMQ(nil), Topic: "t", NodeID: "n1", Config: cfg}
		if _, err := StartMQ(newSupervisor(t, newSystem(t), "workers"), mq); !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("StartMQ: %v, want a config error on %s", err, tc.key)
		}
		if _, err := ProcessMQBatch(context.Background(), mq, "mq-1"); !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("ProcessMQBatch: %v, want a config error on %s", err, tc.key)
		}
	}
}

func TestExponentialBackoffDoublesAndCaps(t *testing.T) {
	cfg := testConfig(func(c *configs.OutboxWorkerConfig) {
		c.RetryStrategy, c.PollInterval, c.MaxBackoff = configs.RetryExponential, time.Second, 60*time.Second
	})
	for n := 1; n <= 80; n++ {
		base := cfg.MaxBackoff
		if n < 6 { // 2^6 s > 60 s
			base = cfg.PollInterval << n
		}
		d := backoff(cfg, "ev-x", n)
		if d < base/2 || d >= base {
			t.Fatalf("n=%d: backoff %s outside [%s, %s)", n, d, base/2, base)
		}
		if again := backoff(cfg, "ev-x", n); again != d {
			t.Fatalf("n=%d: jitter not stable: %s then %s", n, d, again)
		}
	}
	// Jitter spreads rows that failed together.
	seen := map[time.Duration]bool{}
	for i := range 20 {
		seen[backoff(cfg, fmt.Sprintf("ev-%d", i), 3)] = true
	}
	if len(seen) < 15 {
		t.Fatalf("only %d distinct delays for 20 rows: no jitter", len(seen))
	}
	now := time.UnixMilli(1000)
	row := persistence.OutboxRow{Envelope: persistence.Envelope{EventID: "ev-x"}, RetryCount: 1}
	if due := nextRetry(cfg, row, now); due.Sub(now) != backoff(cfg, "ev-x", 2) {
		t.Fatalf("due %s, want now + backoff of the second failure", due)
	}
	cfg.RetryStrategy = configs.RetryFixedInterval
	row.RetryCount = 9
	if due := nextRetry(cfg, row, now); due.Sub(now) != cfg.PollInterval {
		t.Fatal("fixed_interval must retry every poll_interval")
	}
}

func TestPublishOutcomesLogSeedFields(t *testing.T) {
	s := newMemDB(t)
	insert(t, s, joined(t, "ev-ok", clockBase), joined(t, "ev-bad", clockBase+1))
	logs := newLogSink()
	pub := newPublisher(func(_ context.Context, env persistence.Envelope, _ int) error {
		if env.EventID == "ev-bad" {
			return errors.New("im: 503 service unavailable")
		}
		return nil
	})
	if _, err := ProcessBatch(context.Background(), Deps{Store: s, Publisher: pub, NodeID: "node-7",
		Logger: slogNew(logs).With("node_id", "node-7"), Config: testConfig()}); err != nil {
		t.Fatal(err)
	}
	// node_id is the node's logger's, once per line.
	common := map[string]string{"worker": "room_outbox", "node_id": "node-7", "event_type": "RoomUserJoined"}
	want := []map[string]string{
		{"event_id": "ev-ok", "room_id": "room-ev-ok", "retry_count": "0", "status": "published", "error": ""},
		{"event_id": "ev-bad", "room_id": "room-ev-bad", "retry_count": "1", "status": "pending", "error": "im: 503 service unavailable"},
	}
	for _, w := range want {
		for k, v := range common {
			w[k] = v
		}
		if _, ok := logs.find("outbox", w); !ok {
			t.Fatalf("no log record with %v; got %+v", w, logs.all())
		}
	}
}

// Seed 000, Observability: the five metrics, on a /metrics handler.
func TestMetricsExposed(t *testing.T) {
	s := newMemDB(t)
	clock := newClock()
	insert(t, s, joined(t, "ev-ok", clockBase), joined(t, "ev-bad", clockBase+1))
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("registering twice must fail")
	}
	pub := newPublisher(func(_ context.Context, env persistence.Envelope, _ int) error {
		if env.EventID == "ev-bad" {
			return errors.New("down")
		}
		return nil
	})
	if _, err := ProcessBatch(context.Background(), Deps{Store: s, Publisher: pub, NodeID: "n1", Metrics: m, Clock: clock.Now, Config: testConfig()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// ev-bad was created at clockBase+1; the clock is clockBase+60s.
	for _, line := range []string{
		"room_outbox_pending_total 1",
		`room_outbox_publish_success_total{sender="relay"} 1`,
		`room_outbox_publish_failure_total{sender="relay"} 1`,
		`room_outbox_publish_latency_ms_count{sender="relay"} 2`,
		"room_outbox_oldest_pending_age_ms 59999",
		"roomcell_room_outbox_relay_batches_total 1",
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", line, body)
		}
	}
}
