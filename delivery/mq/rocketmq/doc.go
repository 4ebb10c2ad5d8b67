// Package rocketmq is the Apache RocketMQ implementation of delivery/mq's
// Publisher, OrderedPublisher and Subscriber, on the official Go client
// (github.com/apache/rocketmq-client-go/v2, remoting protocol, ACL 1.0
// credentials: access key + secret key, as Tencent Cloud's RocketMQ takes
// them). It is seed 003's production message queue: the relay's MQ fanout
// publishes every room_outbox event to hyapp_room_outbox with the event_id
// as key, the event type as tag and the room as sharding key (one message
// queue per room, so a room's events are stored in room_seq order); the
// notice role's group hyapp-notice-room-outbox consumes RoomUserKicked.
// The fanout hands a room's rows of a round over at once
// (PublishOrderedBatch): one batch request per room and round, on the
// room's queue (the same hash as a single message's), and batches of
// rooms that share a queue travel as one request while that queue has one
// in flight (lanes.go), so a backlog moves at a few requests per queue and
// round rather than a request per event.
//
// A failed message goes back to the broker and is redelivered through the
// group's retry topic, up to MaxRedeliver times (the seed's
// consumer_max_reconsume_times), then lands in the dead-letter topic
// %DLQ%<group>, where it stays for an operator. Offsets are committed
// after the handler returns (and persisted every few seconds), so a
// consumer killed mid-batch has its messages delivered again: handlers
// must be idempotent (the notice handler is, by notice_delivery_events'
// primary key).
//
// It moves bytes with a tag, a key and an order key; it knows nothing of
// rooms, notices or stores, never logs message bodies, and never puts the
// secret key in an error or a log line.
package rocketmq
