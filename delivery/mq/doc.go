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
// Implementations: JetStream here (notice.mq.kind: nats) and Apache
// RocketMQ in delivery/mq/rocketmq (kind: rocketmq, seed 003's production
// queue); the process wiring picks one by mq.kind. Both run one contract
// suite, delivery/mq/mqtest (publish, order per key, redelivery and dead
// letter, consumer restart). OrderedPublisher carries the room as order
// key: RocketMQ puts a room on one message queue; a JetStream stream is in
// order as a whole. OrderedBatchPublisher (RocketMQ) takes a room's rows
// of a round in one request. Neither the MQ fanout worker nor the notice consumer
// knows which runs: they see only Publisher, Subscriber and Message.
// RocketMQ has no publish dedupe window, so a relay retry reaches a group
// twice; the consumers' idempotent inserts absorb it.
package mq
