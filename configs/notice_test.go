package configs

import (
	"errors"
	"testing"
	"time"
)

// Seed 003's defaults: workers, MQ and real IM off locally; the documented
// values in every shipped file.
func TestNoticeDefaultsAndShippedFiles(t *testing.T) {
	c := Default().Notice
	w := c.WalletNoticeWorker
	if w.Enabled || c.RoomNoticeWorker.Enabled || c.MQ.Enabled || c.MQ.RoomOutboxOn() {
		t.Fatalf("local default must send nothing: %+v", c)
	}
	if w.PollInterval != 500*time.Millisecond || w.BatchSize != 100 || w.LockTTL != 30*time.Second || w.MaxRetryCount != 10 ||
		w.MaxBackoff != 5*time.Minute || w.SendTimeout != 5*time.Second || w.SendConcurrency != 16 {
		t.Fatalf("worker defaults %+v", w)
	}
	if c.MQ.Kind != MQKindNATS || c.MQ.RoomOutbox.Topic != "hyapp_room_outbox" || c.MQ.RoomOutbox.ConsumerGroup != "hyapp-notice-room-outbox" ||
		c.MQ.RoomOutbox.MaxRedeliver != 16 || c.GRPCAddr != "127.0.0.1:13009" || c.HTTPAddr != "127.0.0.1:13109" {
		t.Fatalf("mq/ports defaults %+v", c)
	}
	shippedEnv(t)
	for f, enabled := range map[string]bool{"config.yaml": false, "config.docker.yaml": false, "config.tencent.example.yaml": true} {
		c, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		n := c.Notice
		if n.WalletNoticeWorker.Enabled != enabled || n.RoomNoticeWorker.Enabled != enabled || n.MQ.Enabled ||
			n.RoomNoticeWorker.LockTTL != 30*time.Second || n.RoomNoticeWorker.SendConcurrency != 16 || n.MQ.RoomOutbox.MaxRedeliver != 16 {
			t.Fatalf("%s notice block %+v", f, n)
		}
		if enabled && !c.TencentIM.Enabled {
			t.Fatalf("%s enables the notice workers without real IM", f)
		}
	}
}

func TestNoticeBadConfigNamesTheKey(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"notice:\n  wallet_notice_worker:\n    lock_ttl: \"2s\"\n    send_timeout: \"5s\"\n", "notice.wallet_notice_worker.lock_ttl"},
		{"notice:\n  room_notice_worker:\n    poll_interval: \"10m\"\n    max_backoff: \"1m\"\n", "notice.room_notice_worker.max_backoff"},
		{"notice:\n  room_notice_worker:\n    batch_size: 20000\n", "notice.room_notice_worker.batch_size"},
		{"notice:\n  mq:\n    kind: \"kafka\"\n", "notice.mq.kind"},
		{"notice:\n  mq:\n    enabled: true\n    room_outbox:\n      topic: \"a.b\"\n", "notice.mq.room_outbox.topic"},
		{"notice:\n  mq:\n    enabled: true\n    room_outbox:\n      consumer_group: \"g*\"\n", "notice.mq.room_outbox.consumer_group"},
		{"notice:\n  grpc_addr: \"13009\"\n", "notice.grpc_addr"},
	} {
		_, err := Parse([]byte(tc.yaml))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("%q: got %v, want an error naming %s", tc.yaml, err, tc.key)
		}
	}
	if _, err := Parse([]byte("notice:\n  wallet_notice_worker:\n    send_concurency: 4\n")); err == nil {
		t.Fatal("a misspelt key must fail")
	}
}

// The notice role alone serves on 13009/13109; with other roles the
// process keeps grpc.addr/http.addr.
func TestServingAddrs(t *testing.T) {
	c, err := Parse([]byte("roles: [\"notice\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g, h := c.ServingAddrs(); !c.NoticeOnly() || g != "127.0.0.1:13009" || h != "127.0.0.1:13109" {
		t.Fatalf("notice only: %s %s", g, h)
	}
	c, _ = Parse([]byte("roles: [\"room\", \"notice\"]\n"))
	if g, h := c.ServingAddrs(); c.NoticeOnly() || g != c.GRPC.Addr || h != c.HTTP.Addr {
		t.Fatalf("mixed roles: %s %s", g, h)
	}
	c, _ = Parse([]byte("notice:\n  mq:\n    enabled: true\n    room_outbox:\n      enabled: true\n"))
	if !c.Notice.MQ.RoomOutboxOn() {
		t.Fatal("room_outbox fanout not on")
	}
}
