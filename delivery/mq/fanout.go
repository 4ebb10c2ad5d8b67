package mq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hyapp/roomcell/persistence"
)

// RoomPublisher is what the relay publishes room events through
// (actors/relay.Publisher; delivery/roomim.Publisher).
type RoomPublisher interface {
	PublishRoomEvent(ctx context.Context, env persistence.Envelope) error
}

// enqueuer is the relay's queue-many-then-wait interface
// (actors/relay.Enqueuer), implemented by delivery/roomim.Publisher.
type enqueuer interface {
	Enqueue(ctx context.Context, env persistence.Envelope) <-chan error
}

// RoomOutboxFanout is the relay's publisher when the room_outbox MQ
// fanout is on: every event the relay publishes goes to IM through the
// wrapped publisher AND to the topic (tag = event type, key = event_id,
// data = the envelope JSON, the same bytes as the room group message's
// Data), and the result is an error unless both succeeded, so the relay
// marks the row published only then.
//
// At-least-once consequences. The two sends run in parallel and are not
// atomic: when one fails the row stays pending and the relay sends both
// again on a later round. A repeated IM group message is dropped by
// Tencent's 5-minute dedupe (its Random is derived from the event id) and
// otherwise by clients on event_id; a repeated publish is stored once by
// the stream's duplicate window (key = event_id; JetStream 2 minutes,
// RocketMQ has no such window) and otherwise reaches consumers twice,
// where the notice consumer's INSERT on notice_delivery_events' primary
// key makes it a no-op. A relay that crashes between the sends and its
// mark does the same on its next claim. Events the relay marks published
// without calling its publisher (RoomHeatChanged, RoomRankChanged: no IM)
// are not fanned out either.
type RoomOutboxFanout struct {
	im    RoomPublisher
	mq    Publisher
	topic string
}

// NewRoomOutboxFanout wraps im. topic is notice.mq.room_outbox.topic.
func NewRoomOutboxFanout(im RoomPublisher, mq Publisher, topic string) *RoomOutboxFanout {
	return &RoomOutboxFanout{im: im, mq: mq, topic: topic}
}

func (f *RoomOutboxFanout) publishMQ(ctx context.Context, env persistence.Envelope) error {
	data, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("mq: fanout %s: %w", env.EventID, err)
	}
	if err := f.mq.Publish(ctx, f.topic, env.EventType, env.EventID, data); err != nil {
		return fmt.Errorf("mq fanout: %w", err)
	}
	return nil
}

// PublishRoomEvent implements the relay's Publisher.
func (f *RoomOutboxFanout) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	return <-f.Enqueue(ctx, env)
}

// Enqueue implements the relay's Enqueuer, so a wrapped roomim publisher
// keeps its per-room queues and hot-room coalescing: the IM event is queued
// at once and the publish runs beside it.
func (f *RoomOutboxFanout) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	out := make(chan error, 1)
	var imDone <-chan error
	if q, ok := f.im.(enqueuer); ok {
		imDone = q.Enqueue(ctx, env)
	} else {
		ch := make(chan error, 1)
		go func() { ch <- f.im.PublishRoomEvent(ctx, env) }()
		imDone = ch
	}
	go func() {
		mqErr := f.publishMQ(ctx, env)
		out <- errors.Join(<-imDone, mqErr)
	}()
	return out
}
