package rocketmq

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/hyapp/roomcell/configs"
)

// Topics creates and deletes topics on one broker of cfg's cluster, with
// cfg's credentials (tests and local setups; production topics are
// created by the cluster's operators).
type Topics struct {
	a      admin.Admin
	broker string
	cfg    configs.MQConfig
}

// NewTopics connects the admin client. broker is the broker's host:port.
func NewTopics(ctx context.Context, cfg configs.MQConfig, broker string) (*Topics, error) {
	installLogger()
	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(cfg.Servers)),
		admin.WithCredentials(primitive.Credentials{AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey}))
	if err != nil {
		return nil, fmt.Errorf("rocketmq: admin: %w", err)
	}
	// The admin client signs its requests only after a call that
	// registers its ACL hook (CreateTopic alone does not): make one.
	_, _ = a.GetAllSubscriptionGroup(ctx, broker, 5*time.Second)
	return &Topics{a: a, broker: broker, cfg: cfg}, nil
}

// Create creates topic with queues read and write queues and waits until
// the name servers route all of them (or ctx ends).
func (t *Topics) Create(ctx context.Context, topic string, queues int) error {
	var err error
	for {
		err = t.a.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(t.broker),
			admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues))
		if err == nil {
			var qs []*primitive.MessageQueue
			if qs, err = t.a.FetchPublishMessageQueues(ctx, topic); err == nil && len(qs) == queues {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rocketmq: create topic %s: %v (%w)", topic, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Delete deletes topic from the broker and the name servers.
func (t *Topics) Delete(ctx context.Context, topic string) error {
	return t.a.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(t.broker),
		admin.WithNameSrvAddr(t.cfg.Servers))
}

// Close closes the admin client.
func (t *Topics) Close() error { return t.a.Close() }
