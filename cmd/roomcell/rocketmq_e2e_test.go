//go:build !race

// rocketmq-client-go's push consumer has data races of its own (its
// process queue's tree is read and written by different goroutines), so
// the tests that run one are built only without -race; `make test` runs
// them in a race-free pass (target rocketmq).

package main

import (
	"context"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq/rocketmq/rocketmqtest"
	"github.com/hyapp/roomcell/persistence"
)

func TestRocketMQFanoutEndToEnd(t *testing.T) { testMQFanoutEndToEnd(t, configs.MQKindRocketMQ) }

func init() {
	rocketMQTopic = func(t *testing.T) string { return rocketmqtest.Shared().Topic(t, "roomcell_test_") }
}

// A broker that refuses the keys, a name server nobody answers on, a
// topic that does not exist: the process starts, room commands succeed at
// once, their IM messages go out (the rows' IM status published), and the
// rows wait MQ-pending for the broker to be fixed.
func TestRoomPathWorksWhenRocketMQFails(t *testing.T) {
	for _, tc := range []struct{ name, server, secret, topic string }{
		{"wrong_secret_key", "127.0.0.1:9876", "not-the-secret", "hyapp_room_outbox"},
		{"unreachable_name_server", "127.0.0.1:1", "roomcell-local-secret", "hyapp_room_outbox"},
		{"missing_topic", "127.0.0.1:9876", "roomcell-local-secret", "roomcell_no_such_topic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app, rc := startDev(t, func(c *configs.Config) {
				withNotices(c)
				c.OutboxWorker.PollInterval = 100 * time.Millisecond
				c.Notice.MQ.Enabled, c.Notice.MQ.Kind, c.Notice.MQ.Servers = true, configs.MQKindRocketMQ, []string{tc.server}
				c.Notice.MQ.AccessKey, c.Notice.MQ.SecretKey = "roomcell", tc.secret
				c.Notice.MQ.RoomOutbox.Enabled, c.Notice.MQ.RoomOutbox.Topic = true, tc.topic
				c.Notice.MQ.RoomOutbox.ConsumerGroup = "hyapp-notice-broken-" + tc.name
			})
			ctx := ctxT(t)
			start := time.Now()
			if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "lalu", RoomId: "r1", UserId: "owner", Name: "n"}); err != nil {
				t.Fatal(err)
			}
			j, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: "lalu", RoomId: "r1", UserId: "bob"})
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("two room commands took %s with the broker failing", d)
			}
			id := j.EventIds[0]
			waitUntil(t, 10*time.Second, "the join's IM message", func() bool {
				row, err := app.store.GetOutbox(context.Background(), id)
				return err == nil && row.Status == persistence.OutboxPublished
			})
			time.Sleep(time.Second) // several fanout rounds
			row, err := app.store.GetOutbox(context.Background(), id)
			if err != nil || row.MQStatus != persistence.OutboxMQPending {
				t.Fatalf("row %+v (%v): want MQ-pending while the broker fails", row, err)
			}
		})
	}
}
