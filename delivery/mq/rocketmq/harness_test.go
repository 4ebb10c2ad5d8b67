//go:build !race

// rocketmq-client-go's push consumer has data races of its own (its
// process queue's tree is read and written by different goroutines), so
// this file is built only without -race; `make test` runs it in a
// race-free pass (target rocketmq).

package rocketmq

import (
	"context"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/mq/mqtest"
)

// The machine's broker (deploy/local/rocketmq/rocketmq.sh, run by
// services.sh); overridable.
const (
	EnvNameServer = "ROOMCELL_TEST_ROCKETMQ"        // default 127.0.0.1:9876
	EnvBroker     = "ROOMCELL_TEST_ROCKETMQ_BROKER" // default 127.0.0.1:10911
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// instance is one name server + broker with its keys.
type instance struct {
	nameServer, broker string
	accessKey          string
	secretKey          string
}

func sharedInstance() instance {
	return instance{
		nameServer: envOr(EnvNameServer, "127.0.0.1:9876"),
		broker:     envOr(EnvBroker, "127.0.0.1:10911"),
		accessKey:  envOr("ROOMCELL_ROCKETMQ_ACCESS_KEY", "roomcell"),
		secretKey:  envOr("ROOMCELL_ROCKETMQ_SECRET_KEY", "roomcell-local-secret"),
	}
}

func (in instance) config() configs.MQConfig {
	return configs.MQConfig{Enabled: true, Kind: configs.MQKindRocketMQ, Servers: []string{in.nameServer},
		AccessKey: in.accessKey, SecretKey: in.secretKey}
}

func (in instance) dial(t testing.TB, opts ...Option) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, in.config(), append([]Option{WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatalf("RocketMQ at %s: %v", in.nameServer, err)
	}
	t.Cleanup(c.Close)
	return c
}

// topic creates a fresh topic with 8 queues on the broker, waits until
// the name server routes it, and deletes it at the end.
func (in instance) topic(t testing.TB) string {
	t.Helper()
	topic := "roomcell_test_" + instanceID()
	in.createTopic(t, topic)
	return topic
}

func (in instance) createTopic(t testing.TB, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tp, err := NewTopics(ctx, in.config(), in.broker)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Create(ctx, topic, 8); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tp.Delete(ctx, topic)
		_ = tp.Close()
	})
}

// deadLetters reads group's dead-letter topic with a group of its own and
// returns the keys there.
func (in instance) deadLetters(t *testing.T, c *Client, group string) []string {
	t.Helper()
	var mu sync.Mutex
	var keys []string
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := c.Subscribe(ctx, mq.Subscription{Topic: "%DLQ%" + group, Group: "dlq-reader-" + instanceID(),
		Handler: func(_ context.Context, m mq.Message) error {
			mu.Lock()
			keys = append(keys, m.Key)
			mu.Unlock()
			return nil
		}})
	if err != nil {
		// No dead letter yet: the broker creates the topic with the first.
		if strings.Contains(err.Error(), "route") {
			return nil
		}
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	_ = k.Stop(sctx)
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(keys)
}

// The MQ contract suite on the machine's RocketMQ broker.
func TestRocketMQContract(t *testing.T) {
	in := sharedInstance()
	mqtest.Run(t, mqtest.Harness{
		Client: func(t *testing.T) mqtest.Client { return in.dial(t) },
		Topic:  func(t *testing.T, _ mqtest.Client) string { return in.topic(t) },
		DeadLetters: func(t *testing.T, c mqtest.Client, _, group string) []string {
			return in.deadLetters(t, c.(*Client), group)
		},
		Batches: true,
		Wait:    60 * time.Second,
	})
}
