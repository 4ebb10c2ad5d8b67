package room

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/persistence"
)

// Enqueuer is a Publisher that can queue an event without waiting for the
// send: events queued one after another keep their order, and a busy room's
// queued events may be sent as one message (Tencent allows 40 messages/s
// per group). The channel receives exactly one result.
type Enqueuer interface {
	Enqueue(ctx context.Context, env persistence.Envelope) <-chan error
}

// publishEvents is sent from a room grain to its own publisher child,
// always on the same member, so it need not be a protobuf message.
type publishEvents struct {
	envs []persistence.Envelope
}

// publisher is a room grain's child that publishes the room's events in
// order, so IM latency never sits on the command path. Success marks the
// row published (best effort); failure leaves it pending with retry_count
// untouched: the outbox relay owns retries.
type publisher struct {
	deps    Deps
	backlog *atomic.Int64
	log     *slog.Logger
}

func (p *publisher) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*publishEvents)
	if !ok {
		return
	}
	if q, ok := p.deps.Publisher.(Enqueuer); ok {
		// Queue in order now; wait for results off the mailbox so the
		// next command's events can join the queue (and coalesce).
		for _, env := range m.envs {
			pctx, cancel := context.WithTimeout(context.Background(), p.deps.Config.PublishTimeout)
			done := q.Enqueue(pctx, env)
			go func() {
				err := <-done
				cancel()
				p.settle(env, err)
				p.backlog.Add(-1)
			}()
		}
		return
	}
	for _, env := range m.envs {
		p.publishOne(env, p.deps.Config.PublishTimeout)
		p.backlog.Add(-1)
	}
}

func (p *publisher) publishOne(env persistence.Envelope, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := p.deps.Publisher.PublishRoomEvent(ctx, env)
	cancel()
	p.settle(env, err)
}

// settle records a publish outcome: published on success, nothing on
// failure (the row stays pending for the relay, retry_count untouched).
//
// Its lines carry seed 000's eight fields like the relay's; retry_count is
// the row's (0: the sync attempt never counts) and path tells the two
// publishers apart.
func (p *publisher) settle(env persistence.Envelope, err error) {
	log := supervise.EventLogger(p.log, OutboxWorker, p.deps.NodeID, env).With(slog.String("path", "sync"))
	if err != nil {
		log.Info("sync publish failed; event stays pending for the outbox relay",
			slog.Int("retry_count", 0), slog.String("status", persistence.OutboxPending), slog.String("error", supervise.ErrorText(err)))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.deps.Config.StoreTimeout)
	err = p.deps.Store.MarkOutboxPublished(ctx, env.EventID, p.deps.Clock().UnixMilli())
	cancel()
	if err != nil {
		// At worst the relay publishes it again; clients dedupe by event_id.
		log.Warn("mark published failed after sync publish",
			slog.Int("retry_count", 0), slog.String("status", persistence.OutboxPending), slog.String("error", supervise.ErrorText(err)))
	}
}

// OutboxWorker is seed 000's `worker` log field, fixed to room_outbox for
// every publish of a room_outbox row, whichever path sends it.
const OutboxWorker = "room_outbox"
