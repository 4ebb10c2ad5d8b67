package mq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/mq/mqtest"
)

// The MQ contract suite on the machine's NATS JetStream (the RocketMQ run
// is in delivery/mq/rocketmq).
func TestJetStreamContract(t *testing.T) {
	mqtest.Run(t, mqtest.Harness{
		Client: func(t *testing.T) mqtest.Client {
			url := os.Getenv(mq.EnvNATS)
			if url == "" {
				url = "nats://127.0.0.1:4222"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			js, err := mq.DialJetStream(ctx, configs.MQConfig{Enabled: true, Kind: configs.MQKindNATS, Servers: []string{url}},
				mq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				t.Fatalf("NATS at %s: %v", url, err)
			}
			t.Cleanup(js.Close)
			return js
		},
		Topic: func(t *testing.T, c mqtest.Client) string {
			js := c.(*mq.JetStream)
			var b [6]byte
			_, _ = rand.Read(b[:])
			topic := "roomcell_contract_" + hex.EncodeToString(b[:])
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := js.EnsureTopic(ctx, topic); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = js.DeleteTopic(ctx, topic)
			})
			return topic
		},
	})
}
