package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/persistence"
)

// The room_outbox MQ fanout in one dev process: the
// relay role runs the worker room_outbox_mq beside room_outbox; a room's
// publish kicks it, so a join reaches the topic at once although both
// workers poll only hourly; the row records the two channels apart (IM
// status published by the room's sync publish, mq_status published by the
// fanout).
func TestMQFanoutEndToEnd(t *testing.T) {
	testMQFanoutEndToEnd(t, configs.MQKindNATS) // RocketMQ: rocketmq_e2e_test.go
}

// rocketMQTopic makes a topic on the machine's broker (set by
// rocketmq_e2e_test.go, which is built without -race only).
var rocketMQTopic func(t *testing.T) string

func testMQFanoutEndToEnd(t *testing.T, kind string) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	topic := "roomcell_test_" + hex.EncodeToString(b[:])
	servers := []string{"nats://127.0.0.1:4222"}
	ak, sk := "", ""
	if kind == configs.MQKindRocketMQ {
		// The machine's broker (deploy/local/rocketmq/rocketmq.sh); a
		// RocketMQ topic is created by its operators, here by the test.
		servers, ak, sk = []string{"127.0.0.1:9876"}, "roomcell", "roomcell-local-secret"
		topic = rocketMQTopic(t)
	}
	app, rc := startDev(t, func(c *configs.Config) {
		withNotices(c)
		c.OutboxWorker.PollInterval = time.Hour
		c.Notice.MQ.Enabled, c.Notice.MQ.Kind, c.Notice.MQ.Servers = true, kind, servers
		c.Notice.MQ.AccessKey, c.Notice.MQ.SecretKey = ak, sk
		c.Notice.MQ.RoomOutbox.Enabled, c.Notice.MQ.RoomOutbox.Topic = true, topic
		c.Notice.MQ.RoomOutbox.ConsumerGroup = "hyapp-notice-" + hex.EncodeToString(b[:])
	})
	if js, ok := app.mq.(*mq.JetStream); ok {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = js.DeleteTopic(ctx, topic)
		})
	}
	if !slices.Contains(app.started, "worker room_outbox_mq") {
		t.Fatalf("started %v: no MQ fanout worker", app.started)
	}
	var mu sync.Mutex
	keys := map[string]bool{}
	c, err := app.mq.Subscribe(context.Background(), mq.Subscription{Topic: topic, Group: "e2e_check_" + hex.EncodeToString(b[:]), Handler: func(_ context.Context, m mq.Message) error {
		mu.Lock()
		keys[m.Key] = true
		mu.Unlock()
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	ctx := ctxT(t)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "lalu", RoomId: "r1", UserId: "owner", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	j, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: "lalu", RoomId: "r1", UserId: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	id := j.EventIds[0]
	waitUntil(t, 30*time.Second, "the join on the topic", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return keys[id]
	})
	waitUntil(t, 5*time.Second, "both channels marked", func() bool {
		row, err := app.store.GetOutbox(context.Background(), id)
		return err == nil && row.Status == persistence.OutboxPublished && row.MQStatus == persistence.OutboxMQPublished
	})
}

// startDevWithMQ starts a dev process with the room_outbox MQ fanout on
// the local NATS, on a topic and consumer group of its own (deleted after).
func startDevWithMQ(t *testing.T, edit func(*configs.Config)) (*App, v1.RoomServiceClient) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	topic := "roomcell_test_" + hex.EncodeToString(b[:])
	app, rc := startDev(t, func(c *configs.Config) {
		edit(c)
		c.Notice.MQ.Enabled, c.Notice.MQ.Kind, c.Notice.MQ.Servers = true, configs.MQKindNATS, []string{"nats://127.0.0.1:4222"}
		c.Notice.MQ.RoomOutbox.Enabled, c.Notice.MQ.RoomOutbox.Topic = true, topic
		c.Notice.MQ.RoomOutbox.ConsumerGroup = "hyapp-notice-" + hex.EncodeToString(b[:])
	})
	if js, ok := app.mq.(*mq.JetStream); ok {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = js.DeleteTopic(ctx, topic)
		})
	}
	return app, rc
}
