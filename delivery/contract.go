package delivery

import (
	"context"

	"github.com/hyapp/roomcell/persistence"
)

// Publisher sends one room event where its row says (room.EventInfo: the
// room's IM group and what follows at Tencent); an event that causes
// nothing there succeeds without a send. It must honour ctx's deadline:
// the room grain and the relay give each event their publish timeout.
// delivery/roomim implements it; the grain's publisher and the outbox
// relay both call it.
type Publisher interface {
	PublishRoomEvent(ctx context.Context, env persistence.Envelope) error
}

// Enqueuer is a Publisher that can queue an event without waiting for the
// send: events of one room queued one after another keep their order (a
// busy room's queued events may go as one message: Tencent allows 40
// messages/s per group), and once one fails the ones queued behind it
// fail unsent. The channel receives exactly one result.
type Enqueuer interface {
	Enqueue(ctx context.Context, env persistence.Envelope) <-chan error
}

// NotifyEnqueuer is an Enqueuer that hands an event's one result to done
// instead of a channel, so a caller needs no goroutine per event to wait
// for it. done runs exactly once, on the publisher's goroutine (or in the
// call itself, for an event settled at once), possibly under the
// publisher's locks: it must not block and must not call the publisher.
type NotifyEnqueuer interface {
	Enqueuer
	EnqueueNotify(ctx context.Context, env persistence.Envelope, done func(error))
}
