// Package mq is the message-queue fanout of room_outbox (seed 003's
// RocketMQ hyapp_room_outbox, generalised): a small Publisher/Subscriber
// interface and its NATS JetStream implementation. The fanout of
// room_outbox to the topic is actors/relay's MQ worker (room_outbox_mq),
// which keeps its own progress per row (mq_status), apart from the IM
// channel's status. Consumers (the notice role's group
// hyapp-notice-room-outbox) get every message at least once and must be
// idempotent; the notice consumer is, by notice_delivery_events' primary
// key. It knows nothing of notices, rooms' rules or stores: it moves bytes
// with a tag and a key. It never logs message bodies or credentials.
//
// Plugging in RocketMQ. configs.MQConfig already has the seed's keys
// (kind, servers = name servers, access_key/secret_key, room_outbox.topic,
// consumer_group, consumer_max_reconsume_times); configs refuses kind
// rocketmq until an adapter exists. An adapter is one file here, e.g.
// rocketmq.go on github.com/apache/rocketmq-client-go/v2:
//   - Publisher: a producer (primitive.NamesrvAddr(servers), credentials
//     from access_key/secret_key); Publish sends SendSync a message on
//     topic with WithTag(tag) and WithKeys([]string{key}), and returns
//     when the broker answered SendOK.
//   - Subscriber: a push consumer with
//     consumer.WithGroupName(s.Group), WithConsumerModel(Clustering),
//     WithMaxReconsumeTimes(s.MaxRedeliver), subscribing s.Topic with the
//     selector "tag1 || tag2" of s.Tags; its callback calls s.Handler per
//     message and returns ConsumeSuccess on nil and on ErrDrop,
//     ConsumeRetryLater otherwise (RocketMQ then redelivers with its own
//     delay levels, up to the max, and moves the message to %DLQ%group).
//   - DialRocketMQ(ctx, cfg) plays DialJetStream's part, and the caller
//     (process wiring) picks the implementation by mq.kind.
//
// Neither the MQ fanout worker nor the notice consumer changes: they see
// only Publisher, Subscriber and Message. RocketMQ has no publish dedupe
// window, so a relay retry reaches the group twice; the consumer's
// idempotent insert absorbs it.
package mq
