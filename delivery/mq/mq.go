package mq

import (
	"context"
	"errors"
	"time"
)

// ErrDrop: a Handler's verdict that a message can never be processed
// (it does not decode). The message is dropped from the consumer at once
// instead of being redelivered.
var ErrDrop = errors.New("mq: drop message")

// ErrClosed: the connection was closed.
var ErrClosed = errors.New("mq: closed")

// Message is one message of a topic as a consumer sees it.
type Message struct {
	Topic string
	// Tag is the message's type (the room event type): RocketMQ's tag,
	// the last token of the JetStream subject.
	Tag string
	// Key identifies the fact (the event_id): RocketMQ's key, JetStream's
	// Nats-Msg-Id (publishes of one key within the stream's duplicate
	// window are stored once).
	Key  string
	Data []byte
	// Delivery counts this message's deliveries to the group, from 1.
	Delivery int
}

// Publisher publishes to a topic. It returns once the broker has stored
// the message (a JetStream PubAck, a RocketMQ SendSync OK).
type Publisher interface {
	Publish(ctx context.Context, topic, tag, key string, data []byte) error
}

// OrderedPublisher publishes messages that keep their order per orderKey
// (a room: "app_code/room_id"): messages of one key published one after
// the other are stored, and reach an Ordered subscription, in that order.
// RocketMQ puts every key on one message queue; a JetStream stream is in
// order as a whole.
type OrderedPublisher interface {
	PublishOrdered(ctx context.Context, topic, tag, key, orderKey string, data []byte) error
}

// Outgoing is one message of a batch: its type (tag), its key and its
// bytes.
type Outgoing struct {
	Tag  string
	Key  string
	Data []byte
}

// OrderedBatchPublisher publishes several messages of one orderKey with
// as few broker round trips as it can (RocketMQ: one batch request per
// chunk of up to about a MiB, all on the key's message queue). The
// messages are stored in slice order, after the key's earlier messages.
// It returns how many of msgs, from the first, are known to be stored;
// with an error the message at that index and the later ones may or may
// not be stored (the caller sends them again: consumers absorb the
// duplicate by key). An error whose Permanent() is true says the broker
// refuses the chunk as it is (too large): sending its messages one at a
// time finds the one to give up on.
type OrderedBatchPublisher interface {
	PublishOrderedBatch(ctx context.Context, topic, orderKey string, msgs []Outgoing) (int, error)
}

// Handler processes one message. nil acknowledges it; an error wrapping
// ErrDrop drops it; any other error has it redelivered after a backoff,
// until MaxRedeliver redeliveries, then it is dropped.
type Handler func(ctx context.Context, m Message) error

// Subscription describes a durable consumer group on a topic: every
// group gets every message once (at least once), and the members of one
// group share the messages.
type Subscription struct {
	Topic string
	Group string
	// Tags, if set, are the only message types delivered.
	Tags []string
	// MaxRedeliver is how often a failed message is delivered again
	// (RocketMQ's max reconsume times).
	MaxRedeliver int
	// AckWait is how long a delivered message may stay unacknowledged
	// before the broker redelivers it (default 30 s). HandlerTimeout
	// bounds one Handler call (default 10 s).
	AckWait        time.Duration
	HandlerTimeout time.Duration
	// RedeliverAfter is the wait before the first redelivery of a failed
	// message; it doubles per delivery up to a minute (default 1 s).
	RedeliverAfter time.Duration
	// Ordered: messages of one order key are handled one at a time, in
	// the order they were stored. On RocketMQ a failing message holds
	// back the later ones of its queue until it succeeds or is
	// dead-lettered; JetStream redelivers it after the later ones.
	Ordered bool
	Handler Handler
}

// Consumer is a running subscription.
type Consumer interface {
	// Stop stops fetching, lets the message being handled finish, and
	// returns when the handler is idle or ctx is done. Unacknowledged
	// messages are redelivered to the group.
	Stop(ctx context.Context) error
}

// Subscriber starts durable consumers.
type Subscriber interface {
	Subscribe(ctx context.Context, s Subscription) (Consumer, error)
}

// RedeliverDelay is the wait before a failed message comes back after
// its delivery-th delivery: first, doubling per delivery, capped at one
// minute.
func RedeliverDelay(first time.Duration, delivery int) time.Duration {
	d := first
	for i := 1; i < delivery && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}
