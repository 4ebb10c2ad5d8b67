package configs

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Seed 003's two example blocks, copied verbatim into testdata, load and
// mean exactly what the nested shape says.
func TestSeed003ExampleBlocksLoadAsTheNestedShape(t *testing.T) {
	t.Setenv("TENCENT_IM_SECRET_KEY", "s3cret")
	for _, tc := range []struct{ file, nested string }{
		{"testdata/seed003_local.yaml", `
mysql:
  wallet_database: "hyapp_wallet"
  room_database: "hyapp_room"
tencent_im:
  enabled: false
notice:
  wallet_notice_worker:
    enabled: false
  room_notice_worker:
    enabled: false
  mq:
    kind: rocketmq
    enabled: false
    room_outbox:
      enabled: false
      topic: "hyapp_room_outbox"
      consumer_group: "hyapp-notice-room-outbox"
`},
		{"testdata/seed003_production.yaml", `
mysql:
  wallet_database: "hyapp_wallet"
  room_database: "hyapp_room"
tencent_im:
  enabled: true
  sdk_app_id: 1400000000
  secret_key: "${TENCENT_IM_SECRET_KEY}"
  admin_identifier: "administrator"
notice:
  wallet_notice_worker: {enabled: true, poll_interval: 500ms, batch_size: 100, lock_ttl: 30s, max_retry_count: 10}
  room_notice_worker: {enabled: true, poll_interval: 500ms, batch_size: 100, lock_ttl: 30s, max_retry_count: 10}
  mq:
    kind: rocketmq
    enabled: true
    servers: ["TENCENT_ROCKETMQ_NAMESERVER:9876"]
    access_key: "TENCENT_ROCKETMQ_ACCESS_KEY"
    secret_key: "TENCENT_ROCKETMQ_SECRET_KEY"
    room_outbox:
      enabled: true
      topic: "hyapp_room_outbox"
      consumer_group: "hyapp-notice-room-outbox"
      consumer_max_reconsume_times: 16
`},
	} {
		seed, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		// For the notice role, as seed 003 runs it.
		got, err := Parse(append([]byte("roles: [notice]\n"), seed...))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		want, err := Parse([]byte("roles: [notice]\n" + tc.nested))
		if err != nil {
			t.Fatalf("%s nested form: %v", tc.file, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s\n got %+v\nwant %+v", tc.file, got, want)
		}
		if got.Notice.MQ.Kind != MQKindRocketMQ || got.MySQL.WalletDatabase != "hyapp_wallet" || !got.NoticeOnly() {
			t.Fatalf("%s: %+v", tc.file, got.Notice.MQ)
		}
		if g, h := got.ServingAddrs(); g != "127.0.0.1:13009" || h != "127.0.0.1:13109" {
			t.Fatalf("%s serves on %s/%s, want seed 003's 13009/13109", tc.file, g, h)
		}
	}
	prod, _ := os.ReadFile("testdata/seed003_production.yaml")
	c, err := Parse(prod)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Notice.WalletNoticeWorker.Enabled || c.Notice.RoomNoticeWorker.BatchSize != 100 || c.Notice.MQ.RoomOutbox.MaxRedeliver != 16 ||
		c.TencentIM.SecretKey != "s3cret" || c.Notice.MQ.Servers[0] != "TENCENT_ROCKETMQ_NAMESERVER:9876" {
		t.Fatalf("production block read as %+v / %+v", c.Notice, c.TencentIM.SDKAppID)
	}
	// It starts: the RocketMQ adapter exists.
	if err := c.CheckStart(); err != nil {
		t.Fatalf("CheckStart on rocketmq.enabled: true = %v", err)
	}
	local, _ := os.ReadFile("testdata/seed003_local.yaml")
	if c, err := Parse(local); err != nil || c.CheckStart() != nil {
		t.Fatalf("the local block (rocketmq off) must start: %v", err)
	}
}

// A setting given in both shapes is refused, naming both keys; different
// settings of one block may come from either shape.
func TestSeedShapeMixedWithNestedShape(t *testing.T) {
	for _, tc := range []struct{ yaml, key, other string }{
		{"wallet_database: a\nmysql:\n  wallet_database: b\n", "wallet_database", "mysql.wallet_database"},
		{"room_notice_worker:\n  batch_size: 5\nnotice:\n  room_notice_worker:\n    batch_size: 6\n", "room_notice_worker.batch_size", "notice.room_notice_worker.batch_size"},
		{"rocketmq:\n  name_servers: [a]\nnotice:\n  mq:\n    servers: [b]\n", "rocketmq.name_servers", "notice.mq.servers"},
		{"rocketmq:\n  room_outbox:\n    topic: t\nnotice:\n  mq:\n    room_outbox:\n      topic: u\n", "rocketmq.room_outbox.topic", "notice.mq.room_outbox.topic"},
		{"rocketmq:\n  enabled: false\nnotice:\n  mq:\n    kind: nats\n", "rocketmq", "notice.mq.kind"},
	} {
		_, err := Parse([]byte(tc.yaml))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.other) {
			t.Errorf("%q: got %v, want an error naming %s and %s", tc.yaml, err, tc.key, tc.other)
		}
	}
	c, err := Parse([]byte("wallet_notice_worker:\n  enabled: true\nnotice:\n  wallet_notice_worker:\n    batch_size: 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Notice.WalletNoticeWorker; !w.Enabled || w.BatchSize != 7 || w.LockTTL == 0 {
		t.Fatalf("merged worker %+v", w)
	}
	// Strictness holds inside the seed's blocks too.
	for _, y := range []string{"wallet_notice_worker:\n  batchsize: 5\n", "rocketmq:\n  nameservers: [a]\n", "room_database: [x]\n"} {
		if _, err := Parse([]byte(y)); err == nil {
			t.Errorf("%q loaded", y)
		}
	}
}
