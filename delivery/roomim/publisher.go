package roomim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/internal/tracing"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

var (
	// ErrInvalidEnvelope: the envelope lacks what a message needs
	// (event_id, app_code, room_id) or its payload does not decode.
	// Retrying cannot help.
	ErrInvalidEnvelope = errors.New("roomim: invalid envelope")
	// ErrClosed: the publisher was closed.
	ErrClosed = errors.New("roomim: publisher closed")
	// ErrHeldBack: the event was not sent because an event queued before
	// it for the same room failed (or expired unsent): sending it would put
	// the room's events out of order at IM.
	ErrHeldBack = errors.New("roomim: held back behind an earlier failed event of the room")
)

// permanentError marks a failure no retry can fix as the event stands: the
// envelope is invalid, or Tencent refuses the message itself (bad request,
// content, rejected). The outbox relay parks such rows. Auth, admin,
// app-state and transport errors are not permanent: they are about the
// deployment, not the event, and clear up when it is fixed.
type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Permanent() bool { return true }

// classify wraps an error that is permanent for the event.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrInvalidEnvelope) {
		return &permanentError{err}
	}
	switch tencentim.ClassOf(err) {
	case tencentim.ClassBadRequest, tencentim.ClassContent, tencentim.ClassRejected:
		return &permanentError{err}
	}
	return err
}

// Ext values of the TIMCustomElem, so clients can tell the Data shapes
// apart without parsing: one envelope (ExtRoomEvent), or a coalesced
// batch: in the compact form (ExtRoomEventsCompact, compact.go, the
// default) or, with WithBatchFormat(BatchEnvelopes) for clients that do
// not read the compact form yet, {"events":[envelope...]} (ExtRoomEvents).
const (
	ExtRoomEvent  = "room_event"
	ExtRoomEvents = "room_events"
)

// Defaults for coalesced messages: Tencent's limit is 12 KB per message
// (tencentim.MaxMessageBytes, Data+Ext+CloudCustomData); a batch stays
// under 11 KB so any difference in how Tencent counts has room. The event
// bound is far above what 11 KB holds: bytes decide.
const (
	DefaultMaxBatchEvents = 200
	DefaultMaxBatchBytes  = 11 * 1024
)

// Publisher turns room events into Tencent IM calls. Each room group has
// a queue drained by one goroutine with at most one send in flight, so a
// room's messages leave in enqueue order. While that send waits for the
// group's budget (40 msgs/s by default) or for Tencent, later events of
// the room pile up and the next send carries all of them (up to the batch
// bounds) in one message: a hot room gets fewer, fuller messages instead
// of dropped ones or an ever-growing delay. Every caller still gets the
// result of the message that carried its event.
type Publisher struct {
	client    *tencentim.Client
	log       *slog.Logger
	maxEvents int
	maxBytes  int
	envelopes bool // coalesce as ExtRoomEvents instead of the compact form
	known     *tencentim.IDSet
	// groupType is the type room groups are created with: an AVChatRoom
	// loses a kicked member by a ban, the other types by removal.
	groupType string
	audio     Audio // nil: no audio rooms to enforce (trtc off)
	// enforceTickets: rights that shrink also remove the user from the
	// audio room (WithTicketEnforcement).
	enforceTickets bool
	now            func() time.Time
	// effectsDone remembers the effect steps (effects.go) this process
	// completed, so a retried event does not repeat them when its row's
	// record of them (stepsOf) is missing or failed.
	effectsDone *tencentim.IDSet
	// stepsOf gives the store of a room's outbox rows, where an event's
	// finished steps are kept for retries in any process (nil: memory
	// only); stepsTimeout bounds each call to it.
	stepsOf      func(persistence.RoomKey) EffectSteps
	stepsTimeout time.Duration

	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	queues map[string]*groupQueue
	// blocked holds back a group's later events after a failed send, also
	// those enqueued after the failure (a sender learns of it only when its
	// result arrives): see holdBack.
	blocked map[string]block
}

// block: events of the group above seq are refused until one at or below
// it is enqueued (a sender starting again from the failed event) or until
// the block expires. The expiry covers the event having been delivered by
// another process meanwhile: then nobody here will enqueue it again. It
// is far longer than a sender needs to learn of a failure (its result
// arrives within milliseconds), so it holds back the rest of that
// sender's turn.
type block struct {
	seq   int64
	until time.Time
}

// blockTTL is how long a failed send holds back the group's later events.
const blockTTL = 2 * time.Second

// Option configures a Publisher.
type Option func(*Publisher)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(p *Publisher) { p.log = l } }

// WithMaxBatchEvents bounds how many events one coalesced message carries.
func WithMaxBatchEvents(n int) Option { return func(p *Publisher) { p.maxEvents = max(1, n) } }

// WithMaxBatchBytes bounds Data+Ext+CloudCustomData of a coalesced
// message, at most tencentim.MaxMessageBytes. A single event larger than
// this is still sent alone (and refused when over Tencent's limit).
func WithMaxBatchBytes(n int) Option {
	return func(p *Publisher) { p.maxBytes = min(max(1, n), tencentim.MaxMessageBytes) }
}

// Batch formats of coalesced messages (tencent_im.batch_format).
const (
	BatchCompact   = "compact"
	BatchEnvelopes = "envelopes"
)

// WithBatchFormat picks the form of coalesced messages: BatchCompact (the
// default: ~3x the events per message, so ~3x a hot room's event rate at
// Tencent's 40 messages/s per group) or BatchEnvelopes (full envelopes,
// the form clients of earlier releases read). Other values keep the
// default; configs validates the key.
func WithBatchFormat(f string) Option {
	return func(p *Publisher) { p.envelopes = f == BatchEnvelopes }
}

func (p *Publisher) newBatch(first persistence.Envelope) batchForm {
	if p.envelopes {
		return &envelopeBatch{}
	}
	return newCompactBatch(first)
}

// New returns a publisher sending through client. Close it on shutdown.
func New(client *tencentim.Client, opts ...Option) *Publisher {
	p := &Publisher{
		client:       client,
		log:          slog.Default(),
		maxEvents:    DefaultMaxBatchEvents,
		maxBytes:     DefaultMaxBatchBytes,
		known:        tencentim.NewIDSet(100_000),
		groupType:    client.GroupType(),
		now:          time.Now,
		effectsDone:  tencentim.NewIDSet(100_000),
		stepsTimeout: defaultStepsTimeout,
		queues:       map[string]*groupQueue{},
		blocked:      map[string]block{},
	}
	for _, o := range opts {
		o(p)
	}
	p.base, p.cancel = context.WithCancel(context.Background())
	return p
}

// Close stops accepting events, cancels sends in flight and waits for the
// queues to drain (their events fail with ErrClosed or a context error and
// stay pending in the outbox).
func (p *Publisher) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

type itemKind int

const (
	kindSend itemKind = iota
	kindCreate
)

type item struct {
	ctx     context.Context
	env     persistence.Envelope
	kind    itemKind
	enc     []byte    // its form in the coalesced batch that took it
	batch   batchForm // that batch
	created room.RoomCreated
	effects effects // what the event does at Tencent after its message (effects.go)
	// stepsDone are the effect steps known done (effects.go): read from
	// the event's row before its turn, added to as they finish.
	stepsDone uint32
	done      func(error) // the one result (Enqueue's channel, or EnqueueNotify's caller)
	// traceparent is the trace context of the command that wrote the
	// event ("" when not traced): the send's span links to it.
	traceparent string
}

type groupQueue struct {
	pending []*item
}

// dropFrom answers the item at index i with first and the ones after it
// with ErrHeldBack, and drops them all from the queue. Guarded by the
// publisher's mu.
func (q *groupQueue) dropFrom(i int, first, cause error) {
	for j, it := range q.pending[i:] {
		if j == 0 && first != nil {
			it.done(first)
			continue
		}
		// %v, not %w: a held-back event is never permanent itself.
		it.done(fmt.Errorf("%w: %v", ErrHeldBack, cause))
	}
	q.pending = q.pending[:i]
}

// PublishRoomEvent publishes one room event and waits for the outcome:
//   - RoomCreated: idempotent create of the room's group (CreateRoom's
//     group step, and its outbox compensation when that failed); no call
//     when this publisher already saw the group created.
//   - IM events (room.IsIMEvent): a send_group_msg to the room's group
//     with a TIMCustomElem whose Data is the envelope JSON, then the
//     event's effects (effects.go: RoomUserKicked, RoomClosed); the
//     result is nil only when the message and every effect are done.
//   - anything else: nil without any call, so the row is marked published.
func (p *Publisher) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	ch := p.Enqueue(ctx, env)
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("roomim: publish %s: %w", env.EventID, ctx.Err())
	}
}

// Enqueue is PublishRoomEvent without the wait: the event takes its place
// in the room's queue before Enqueue returns, so events enqueued one after
// another by the same caller are sent in that order, and a caller that
// enqueues many events lets them coalesce. The channel receives exactly
// one result. ctx bounds the event's life: once it is done, the event is
// no longer sent if it has not been yet.
func (p *Publisher) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	ch := make(chan error, 1)
	p.EnqueueNotify(ctx, env, func(err error) { ch <- err })
	return ch
}

// EnqueueNotify is Enqueue with the result handed to done
// (delivery.NotifyEnqueuer): the room grain's publisher settles each
// event there, instead of a goroutine per event waiting on a channel.
func (p *Publisher) EnqueueNotify(ctx context.Context, env persistence.Envelope, done func(error)) {
	resolved := func(err error) { done(classify(err)) }
	if env.EventID == "" || env.AppCode == "" || env.RoomID == "" {
		resolved(fmt.Errorf("%w: event_id, app_code and room_id are required", ErrInvalidEnvelope))
		return
	}
	it := &item{ctx: ctx, env: env, done: done, traceparent: env.TraceParent}
	// The trace context is ours, not the clients': it is linked from the
	// send's span (tracing.go) and left out of the message.
	it.env.TraceParent = ""
	gid := GroupID(env.AppCode, env.RoomID)
	switch {
	case room.Causes(env.EventType, room.IMCreate):
		ev, err := room.DecodeEvent(env.EventType, env.Payload)
		created, ok := ev.(room.RoomCreated)
		if err != nil || !ok {
			resolved(fmt.Errorf("%w: %s: %v (a group is made from a RoomCreated)", ErrInvalidEnvelope, env.EventID, err))
			return
		}
		// A reopen makes the group again: this node may have known it
		// before another node's close destroyed it.
		if p.known.Has(gid) && !created.Reopened {
			resolved(nil)
			return
		}
		it.kind, it.created = kindCreate, created
	case room.IsIMEvent(env.EventType):
		fx, err := effectsOf(env, p.enforceTickets)
		if err != nil {
			resolved(fmt.Errorf("%w: %s: %v", ErrInvalidEnvelope, env.EventID, err))
			return
		}
		it.effects = fx
		if len(env.Payload) > 0 && !json.Valid(env.Payload) {
			resolved(fmt.Errorf("%w: %s: payload is not JSON", ErrInvalidEnvelope, env.EventID))
			return
		}
	default:
		resolved(nil)
		return
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		resolved(ErrClosed)
		return
	}
	if b, ok := p.blocked[gid]; ok && it.kind == kindSend {
		switch {
		case env.RoomSeq <= b.seq || time.Now().After(b.until):
			delete(p.blocked, gid)
		default:
			resolved(fmt.Errorf("%w: event at seq %d failed", ErrHeldBack, b.seq))
			return
		}
	}
	q := p.queues[gid]
	if q == nil {
		q = &groupQueue{}
		p.queues[gid] = q
		p.wg.Add(1)
		go p.drain(gid, q)
	}
	q.pending = append(q.pending, it)
}

// take removes the next unit of work from the queue: one create, or a run
// of sends within the batch bounds, in room_seq order. It returns nil, and
// forgets the queue, when nothing is left.
func (p *Publisher) take(gid string, q *groupQueue) []*item {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, it := range q.pending {
		if err := it.ctx.Err(); err != nil {
			// Its caller has gone (the outbox still has it); the events
			// queued behind it, or enqueued soon, must not overtake it.
			q.dropFrom(i, err, err)
			p.blockLocked(gid, it.env.RoomSeq)
			break
		}
	}
	if len(q.pending) == 0 {
		delete(p.queues, gid)
		return nil
	}
	first := q.pending[0]
	n := 1
	// A batch is cut only where a second event could join the first: a
	// lone event goes as its full envelope (sendBatch), so encoding it
	// for a batch as well was a tenth of a quiet room's IM path.
	if first.kind == kindSend && len(q.pending) > 1 && p.maxEvents > 1 && !first.effects.any() {
		// Sizes are exact: each event is encoded as the batch will carry
		// it, so a batch never passes maxBytes.
		cb := p.newBatch(first.env)
		first.enc, first.batch = cb.add(first.env, p.maxBytes), cb
		// An event that does not encode (Enqueue checked its payload, so
		// never in practice) goes alone, as its full envelope.
		// An event with effects travels alone. The events after it are
		// sent only once its effects are done, so a kick's ban or a close's
		// teardown is in room order with the messages around it. And its
		// message is always the same one (its own envelope, the Random of
		// its event id). A retry after a failed effect skips the message
		// its row records as sent (messageSent); should that record have
		// failed, a retry within Tencent's 5-minute dedupe still does not
		// show it to the room twice, where a batch cut differently on the
		// retry would have.
		for first.enc != nil && n < len(q.pending) && n < p.maxEvents && !first.effects.any() {
			next := q.pending[n]
			if next.kind != kindSend || next.effects.any() {
				break
			}
			enc := cb.add(next.env, p.maxBytes)
			if enc == nil {
				break
			}
			next.enc, next.batch = enc, cb
			n++
		}
	}
	batch := make([]*item, n)
	copy(batch, q.pending[:n])
	q.pending = q.pending[n:]
	// A coalesced message is one unit to the client; inside it the events
	// are in room_seq order whatever order concurrent callers queued them
	// in (the events of one command keep their order).
	slices.SortStableFunc(batch, func(a, b *item) int { return cmp.Compare(a.env.RoomSeq, b.env.RoomSeq) })
	return batch
}

func (p *Publisher) drain(gid string, q *groupQueue) {
	defer p.wg.Done()
	for {
		batch := p.take(gid, q)
		if batch == nil {
			return
		}
		if batch[0].kind == kindCreate {
			it := batch[0]
			c := it.created
			err := p.EnsureGroup(it.ctx, it.env.AppCode, it.env.RoomID, c.OwnerUserID, c.Name)
			if err != nil {
				p.holdBack(gid, q, batch, err)
			}
			it.done(classify(err))
			continue
		}
		// A failure holds the room back before its callers hear of it:
		// a caller answered first could enqueue its next event in time to
		// be dropped as if it had been queued behind the failure.
		var err error
		if len(batch) == 1 && batch[0].effects.any() {
			p.loadSteps(batch[0])
		}
		if !p.messageSent(batch) {
			span := sendSpan(gid, batch) // tracing.go
			err = p.sendBatch(span, gid, batch)
			tracing.End(span, err)
		}
		if err != nil {
			p.holdBack(gid, q, batch, err)
			for _, it := range batch {
				it.done(classify(err))
			}
			continue
		}
		// The message is out; now what the events do at Tencent, in
		// room order. The first effect that fails fails its event (the
		// outbox retries it, from the first step not done) and holds back
		// the rest, like a failed send.
		var ferr error
		for i, it := range batch {
			switch {
			case ferr != nil:
				it.done(fmt.Errorf("%w: %v", ErrHeldBack, ferr))
			default:
				if ferr = p.runEffects(it, gid); ferr != nil {
					p.holdBack(gid, q, batch[i:], ferr)
				}
				it.done(classify(ferr))
			}
		}
	}
}

// holdBack fails every event still queued for the room after a failed
// send, and blocks the ones enqueued soon after: they wait for the failed
// one's retry instead of overtaking it. A permanent failure blocks
// nothing: that event is parked and releases its room.
func (p *Publisher) holdBack(gid string, q *groupQueue, failed []*item, cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q.dropFrom(0, nil, cause)
	// Permanent errors park their event; an error that merely has the
	// method (a TRTC InternalError answers false) must still block, or a
	// sender enqueueing one event at a time sends the next ones before
	// the failed one's retry.
	var perm interface{ Permanent() bool }
	if errors.As(classify(cause), &perm) && perm.Permanent() {
		return
	}
	seq := failed[0].env.RoomSeq
	for _, it := range failed {
		seq = min(seq, it.env.RoomSeq)
	}
	p.blockLocked(gid, seq)
}

// blockLocked holds back the group's events above seq (see block). Guarded
// by mu.
func (p *Publisher) blockLocked(gid string, seq int64) {
	if b, ok := p.blocked[gid]; ok {
		seq = min(seq, b.seq)
	}
	p.blocked[gid] = block{seq: seq, until: time.Now().Add(blockTTL)}
}

// batchContext lives while at least one caller of the batch still waits
// (and the publisher is open): the send is abandoned only when nobody
// wants its result.
func (p *Publisher) batchContext(batch []*item) (context.Context, func()) {
	ctx, cancel := context.WithCancel(p.base)
	var live atomic.Int64
	live.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, it := range batch {
		stops[i] = context.AfterFunc(it.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// sendBatch sends batch's message; span is the send's, the parent of the
// IM calls' (the calls' context is batchContext's).
func (p *Publisher) sendBatch(span trace.Span, gid string, batch []*item) error {
	ctx, done := p.batchContext(batch)
	defer done()
	if span.IsRecording() {
		ctx = trace.ContextWithSpan(ctx, span)
	}
	msg := tencentim.GroupMessage{GroupID: gid, Priority: "Normal"}
	ids := make([]string, len(batch))
	for i, it := range batch {
		ids[i] = it.env.EventID
		if info, _ := room.EventInfoOf(it.env.EventType); info.High {
			// Tencent drops lower priorities first when a group is over
			// its rate; the room's registry names the events it cannot lose.
			msg.Priority = "High"
		}
	}
	if len(batch) == 1 {
		// A quiet room's event goes as the full envelope, as always.
		data, err := json.Marshal(batch[0].env)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidEnvelope, ids[0], err)
		}
		cloud, _ := json.Marshal(struct {
			EventID string `json:"event_id"`
		}{ids[0]})
		msg.Elem = tencentim.CustomElem{Data: string(data), Ext: ExtRoomEvent}
		msg.CloudCustomData = string(cloud)
		_, msg.Random = tencentim.EventRandoms(ids[0])
	} else {
		data, ext, cloud := batch[0].batch.message(batch)
		msg.Elem = tencentim.CustomElem{Data: data, Ext: ext}
		msg.CloudCustomData = cloud
		// A retried batch may be cut differently and so miss Tencent's
		// dedupe; clients still drop repeats by event_id.
		_, msg.Random = tencentim.EventRandoms(strings.Join(ids, "\n"))
	}
	_, err := p.client.SendGroupMsg(ctx, msg)
	if tencentim.CodeOf(err) == 10010 && closes(batch) {
		// A close whose teardown already ran (its retry after a later
		// step failed, in another process): the group is gone, which is
		// what the close wants. Making it again would leave a closed
		// room's group behind.
		p.log.Info("room im group already gone on close", "group_id", gid)
		return nil
	}
	if tencentim.CodeOf(err) == 10010 {
		// The room exists (it is the source of truth) but its IM group
		// does not: created before IM was configured, lost with a dev
		// fake's restart, or gone on Tencent's side. Recreate it
		// (idempotent) and send once more rather than failing forever.
		env := batch[0].env
		if cerr := p.EnsureGroup(ctx, env.AppCode, env.RoomID, "", ""); cerr == nil {
			p.log.Info("room im group was missing; recreated", "group_id", gid)
			_, err = p.client.SendGroupMsg(ctx, msg)
		}
	}
	if err != nil {
		p.log.Info("room im send failed", "group_id", gid, "events", len(batch), "first_event_id", ids[0], "error", err)
		return err
	}
	if len(batch) > 1 {
		p.log.Debug("room im events coalesced", "group_id", gid, "events", len(batch))
	}
	p.sent(batch)
	return nil
}

// GroupKnown reports whether this publisher created (or found) the
// room's group: CreateRoom's repeat answers im_group_ready from it.
func (p *Publisher) GroupKnown(appCode, roomID string) bool {
	return p.known.Has(GroupID(appCode, roomID))
}

// EnsureGroup creates the room's IM group if it does not exist yet
// (idempotent: Tencent's "already exists" is success). The room grain
// calls it on CreateRoom's path, beside the command's append and before
// the reply, through PublishRoomEvent(RoomCreated) under
// room.create_group_timeout (should the append fail, it takes the group
// back: DropGroup); the same RoomCreated row, left pending when the call
// failed, repeats it from the room's publisher or the relay until IM
// answers. ownerUserID may be empty (the app admin then manages the
// group).
func (p *Publisher) EnsureGroup(ctx context.Context, appCode, roomID, ownerUserID, name string) error {
	gid := GroupID(appCode, roomID)
	err := p.client.CreateGroup(ctx, tencentim.Group{
		GroupID:      gid,
		Name:         groupName(name, roomID),
		OwnerAccount: ownerUserID,
	})
	if err != nil {
		return err
	}
	p.known.Add(gid)
	return nil
}

// DropGroup destroys the room's group and forgets it (a group already
// gone is success): CreateRoom made it beside an append that failed, and
// the room it was made for does not exist.
func (p *Publisher) DropGroup(ctx context.Context, appCode, roomID string) error {
	gid := GroupID(appCode, roomID)
	p.known.Remove(gid)
	return p.client.DestroyGroup(ctx, gid)
}

// SendNotice sends a private notice (seed 003: Ext "wallet_notice",
// "vip_notice", "room_notice") to one user as a C2C TIMCustomElem with
// data as Data, the event id in CloudCustomData, and MsgSeq/MsgRandom
// derived from the event id so a retry within 120 s is dropped by Tencent.
// IM accounts are the users' ids as they are: appCode only labels logs.
func (p *Publisher) SendNotice(ctx context.Context, appCode, toUserID, ext string, data []byte, eventID string) error {
	if toUserID == "" || ext == "" || eventID == "" {
		return fmt.Errorf("%w: notice needs a user, an ext and an event id", ErrInvalidEnvelope)
	}
	cloud, _ := json.Marshal(struct {
		EventID string `json:"event_id"`
	}{eventID})
	seq, rnd := tencentim.EventRandoms(eventID)
	_, err := p.client.SendC2C(ctx, tencentim.C2CMessage{
		ToAccount:       toUserID,
		MsgSeq:          seq,
		MsgRandom:       rnd,
		Elem:            tencentim.CustomElem{Data: string(data), Ext: ext},
		CloudCustomData: string(cloud),
	})
	if err != nil {
		p.log.Info("notice send failed", "app_code", appCode, "user_id", toUserID, "ext", ext, "event_id", eventID, "error", err)
	}
	return err
}
