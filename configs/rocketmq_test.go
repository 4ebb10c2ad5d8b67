package configs

import (
	"errors"
	"strings"
	"testing"
)

// Seed 003's rocketmq block with its secrets from the environment: it
// loads as the RocketMQ kind with the keys filled in; a wrong or half
// setting fails naming the key and never carries the secret.
func TestRocketMQBlockWithEnvSecrets(t *testing.T) {
	const secret = "s3cr3t-value-never-printed"
	t.Setenv("TEST_ROCKETMQ_AK", "roomcell-ak")
	t.Setenv("TEST_ROCKETMQ_SK", secret)
	block := `rocketmq:
  enabled: true
  name_servers:
    - "127.0.0.1:9876"
  access_key: "${TEST_ROCKETMQ_AK}"
  secret_key: "${TEST_ROCKETMQ_SK}"
  room_outbox:
    enabled: true
    topic: "hyapp_room_outbox"
    consumer_group: "hyapp-notice-room-outbox"
    consumer_max_reconsume_times: 16
`
	c, err := Parse([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	mq := c.Notice.MQ
	if mq.Kind != MQKindRocketMQ || !mq.RoomOutboxOn() || mq.AccessKey != "roomcell-ak" || mq.SecretKey != secret ||
		mq.Servers[0] != "127.0.0.1:9876" || mq.RoomOutbox.MaxRedeliver != 16 || c.CheckStart() != nil ||
		mq.RoomOutbox.IMBridge.Enabled || mq.RoomOutbox.IMBridge.ConsumerGroup != "hyapp-room-im-bridge" {
		t.Fatalf("loaded %+v", mq)
	}
	// Tencent Cloud's name servers are host names, as http://host:port.
	for _, ns := range []string{"rmq-1.example.com:8080", "http://rmq-1.example.com:8080", "https://rmq-1.example.com:8443", "[::1]:9876"} {
		if _, err := Parse([]byte(strings.ReplaceAll(block, `"127.0.0.1:9876"`, `"`+ns+`"`))); err != nil {
			t.Fatalf("name server %s: %v", ns, err)
		}
	}
	for _, tc := range []struct{ name, yaml, key string }{
		// An unset variable fails where it is written; one explicitly
		// defaulted to empty fails where the MQ block is checked.
		{"secret unset", strings.ReplaceAll(block, "${TEST_ROCKETMQ_SK}", "${TEST_ROCKETMQ_UNSET}"), "rocketmq.secret_key"},
		{"access key unset", strings.ReplaceAll(block, "${TEST_ROCKETMQ_AK}", "${TEST_ROCKETMQ_UNSET}"), "rocketmq.access_key"},
		{"secret empty", strings.ReplaceAll(block, "${TEST_ROCKETMQ_SK}", "${TEST_ROCKETMQ_UNSET:-}"), "notice.mq.secret_key"},
		{"access key empty", strings.ReplaceAll(block, "${TEST_ROCKETMQ_AK}", "${TEST_ROCKETMQ_UNSET:-}"), "notice.mq.access_key"},
		{"name server as a NATS URL", strings.ReplaceAll(block, `"127.0.0.1:9876"`, `"nats://127.0.0.1:9876"`), "notice.mq.servers"},
		{"name server with a path", strings.ReplaceAll(block, `"127.0.0.1:9876"`, `"http://ns.example:8080/rocketmq"`), "notice.mq.servers"},
		{"name server without port", strings.ReplaceAll(block, `"127.0.0.1:9876"`, `"rocketmq.example"`), "notice.mq.servers"},
		{"misspelt key", strings.ReplaceAll(block, "consumer_group:", "consumer_groups:"), "rocketmq.room_outbox.consumer_groups"},
		{"topic with a dot", strings.ReplaceAll(block, `topic: "hyapp_room_outbox"`, `topic: "hyapp.room"`), "notice.mq.room_outbox.topic"},
		{"IM bridge in the notice group", block + "    im_bridge: {enabled: true, consumer_group: \"hyapp-notice-room-outbox\"}\n", "notice.mq.room_outbox.im_bridge.consumer_group"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil {
			t.Fatalf("%s: loaded", tc.name)
		}
		var ce *Error
		if errors.As(err, &ce) && ce.Key != tc.key || !strings.Contains(err.Error(), tc.key) {
			t.Fatalf("%s: %v, want the key %s named", tc.name, err, tc.key)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("%s: the error carries the secret: %v", tc.name, err)
		}
	}
}
