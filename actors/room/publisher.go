package room

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/persistence"
)

// publishEvents is sent from a room grain to its own publisher child,
// always on the same member, so it need not be a protobuf message.
type publishEvents struct {
	envs []persistence.Envelope
}

// publisher is a room grain's child that publishes the room's events in
// order, one at a time, so IM latency never sits on the command path.
// Success marks the row published (best effort); failure leaves it pending
// with retry_count untouched: the outbox relay owns retries.
type publisher struct {
	deps    Deps
	backlog *atomic.Int64
	log     *slog.Logger
}

func (p *publisher) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*publishEvents); ok {
		for _, env := range m.envs {
			p.publishOne(env, p.deps.Config.PublishTimeout)
			p.backlog.Add(-1)
		}
	}
}

func (p *publisher) publishOne(env persistence.Envelope, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := p.deps.Publisher.PublishRoomEvent(ctx, env)
	cancel()
	if err != nil {
		p.log.Info("sync publish failed; event stays pending for the outbox relay",
			"event_id", env.EventID, "event_type", env.EventType, "status", persistence.OutboxPending, "error", err)
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), p.deps.Config.StoreTimeout)
	err = p.deps.Store.MarkOutboxPublished(ctx, env.EventID, p.deps.Clock().UnixMilli())
	cancel()
	if err != nil {
		// At worst the relay publishes it again; clients dedupe by event_id.
		p.log.Warn("mark published failed after sync publish", "event_id", env.EventID, "error", err)
	}
}
