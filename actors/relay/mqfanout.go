package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// MQWorkerName is the MQ fanout worker's actor name and `worker` log field.
const MQWorkerName = "room_outbox_mq"

// mqParallel bounds the rooms one fanout batch publishes at once. A room's
// rows go one after the other (its order on the topic), so the fanout's
// rate is about mqParallel / one send's latency: RocketMQ's SendSync
// (~3 ms here, several times a JetStream publish) drained a 5,000-event
// backlog at ~870 events/s with 16, ~3,600-4,200 with 64; JetStream
// stayed at ~10,000 (BenchmarkMQFanoutBacklog).
const mqParallel = 64

// MQPublisher is the message queue the fanout publishes to
// (delivery/mq.Publisher): it returns once the broker stored the message.
type MQPublisher interface {
	Publish(ctx context.Context, topic, tag, key string, data []byte) error
}

// MQOrderedPublisher is a message queue that keeps the order per key
// (delivery/mq.OrderedPublisher): the fanout names each event's room, so
// RocketMQ puts a room's events on one message queue, in room_seq order.
type MQOrderedPublisher interface {
	PublishOrdered(ctx context.Context, topic, tag, key, orderKey string, data []byte) error
}

// MQDeps is everything the MQ fanout worker uses. Store, MQ, Topic and
// Config are required.
type MQDeps struct {
	Store persistence.OutboxMQStore
	MQ    MQPublisher
	// Topic is notice.mq.room_outbox.topic.
	Topic string
	// Config is the outbox_worker block: poll_interval, batch_size,
	// publish_timeout and lease_ttl apply to the fanout as to the relay.
	Config  configs.OutboxWorkerConfig
	NodeID  string
	Logger  *slog.Logger
	Metrics *MQMetrics
	Clock   func() time.Time
	// Name is the worker's name under its supervisor; "" = MQWorkerName
	// (one fanout per room database, as the relay).
	Name string
}

func (d MQDeps) normalized() (MQDeps, error) {
	if d.Store == nil || d.MQ == nil || d.Topic == "" {
		return d, errors.New("relay: the MQ fanout needs Store, MQ and Topic")
	}
	cfg, err := d.Config.Normalized()
	if err != nil {
		return d, err
	}
	d.Config = cfg
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	return d, nil
}

// MQResult counts what one fanout batch did.
type MQResult struct {
	Claimed   int
	Published int // stored by the broker and marked
	NoOp      int // events that never go to the topic, marked without a send
	Parked    int // can never be published as they are
	Failed    int // publish failed: released, tried again next round
	// StoreErrors counts marks that did not reach the store; those rows
	// come back when their lease expires (and go to the topic again,
	// stored once by the broker's duplicate window).
	StoreErrors int
}

// ProcessMQBatch is one round of the MQ fanout, the message-queue side of
// room_outbox: claim up to batch_size rows whose MQ
// progress is pending (persistence.OutboxMQStore; the IM status plays no
// part), publish each to Topic (tag = event type, key = event_id, data =
// the envelope JSON, the bytes of the IM group message's Data) with
// publish_timeout, and mark the stored ones MQ-published in one write.
// Rooms go in parallel, a room's rows in room_seq order; a room's first
// failure releases its later rows. A NATS outage therefore leaves rows
// MQ-pending without touching their IM status, and an IM outage leaves
// rows IM-pending without holding the fanout back.
//
// Events that never reach IM (RoomHeatChanged, RoomRankChanged) are not
// fanned out either, as before the split: they are marked without a send.
// An envelope that can never be published (corrupt, or refused by the
// broker as too large) is parked for the MQ channel only.
func ProcessMQBatch(ctx context.Context, deps MQDeps, owner string) (MQResult, error) {
	d, err := deps.normalized()
	if err != nil {
		return MQResult{}, err
	}
	return processMQBatch(ctx, d, owner)
}

func processMQBatch(ctx context.Context, d MQDeps, owner string) (MQResult, error) {
	var res MQResult
	if ctx.Err() != nil {
		return res, nil
	}
	cctx, cancel := context.WithTimeout(ctx, storeTimeout)
	rows, err := d.Store.ClaimOutboxMQ(cctx, owner, d.Clock().UnixMilli(), d.Config.LeaseTTL.Milliseconds(), d.Config.BatchSize)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return res, nil
		}
		return res, fmt.Errorf("relay: claim outbox mq: %w", err)
	}
	res.Claimed = len(rows)
	f := &mqBatch{MQDeps: d, ctx: ctx}
	var wg sync.WaitGroup
	sem := make(chan struct{}, mqParallel)
	for len(rows) > 0 {
		n := 1
		for n < len(rows) && sameRoom(rows[n].Envelope, rows[0].Envelope) {
			n++
		}
		turn := rows[:n]
		rows = rows[n:]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					f.panicked(r, turn)
				}
				<-sem
				wg.Done()
			}()
			f.room(turn)
		}()
	}
	wg.Wait()
	f.settle(&res)
	if f.panic != nil {
		// A publisher bug: the worker's supervisor restarts it (a panic
		// on a room's goroutine would end the process instead). The
		// rooms' marks are written first.
		panic(f.panic)
	}
	return res, nil
}

// panicked records a panic of a room's publish; its rows not yet marked
// are released.
func (f *mqBatch) panicked(r any, rows []persistence.OutboxRow) {
	pe, ok := r.(*supervise.PanicError)
	if !ok {
		pe = &supervise.PanicError{Value: r, Stack: debug.Stack()}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panic == nil {
		f.panic = pe
	}
	for _, row := range rows {
		id := row.Envelope.EventID
		if !slices.Contains(f.published, id) {
			f.release = append(f.release, id)
		}
	}
}

type mqBatch struct {
	MQDeps
	ctx context.Context

	mu        sync.Mutex
	published []string
	release   []string
	res       MQResult
	panic     *supervise.PanicError
}

// room publishes one room's rows in order and stops at its first failure.
func (f *mqBatch) room(rows []persistence.OutboxRow) {
	for i, row := range rows {
		env := row.Envelope
		if f.ctx.Err() != nil {
			f.giveBack(rows[i:], nil)
			return
		}
		err := checkEnvelope(env)
		if err == nil && !room.IsIMEvent(env.EventType) && env.EventType != room.TypeRoomCreated {
			f.done(env.EventID, false)
			continue
		}
		if err == nil {
			err = f.publish(env)
		}
		switch {
		case err == nil:
			f.done(env.EventID, true)
		case parkable(err):
			f.park(env, err)
		default:
			f.giveBack(rows[i:], &failure{env: env, err: err})
			return
		}
	}
}

type failure struct {
	env persistence.Envelope
	err error
}

func (f *mqBatch) publish(env persistence.Envelope) error {
	data, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptEnvelope, err)
	}
	// The stop request cancels between rows; a publish in flight gets its
	// publish_timeout.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), f.Config.PublishTimeout)
	defer cancel()
	start := time.Now()
	if op, ok := f.MQ.(MQOrderedPublisher); ok {
		err = op.PublishOrdered(pctx, f.Topic, env.EventType, env.EventID, OrderKey(env), data)
	} else {
		err = f.MQ.Publish(pctx, f.Topic, env.EventType, env.EventID, data)
	}
	if f.Metrics != nil {
		f.Metrics.Latency.Observe(float64(time.Since(start).Microseconds()) / 1000)
	}
	return err
}

// OrderKey is the order key of a room's events on the topic:
// "app_code/room_id". A room's events are published one after the other
// (its rows in room_seq order, one sender per room by the row leases), so
// on one queue they are stored in room_seq order.
func OrderKey(env persistence.Envelope) string { return env.AppCode + "/" + env.RoomID }

func (f *mqBatch) done(id string, sent bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, id)
	if !sent {
		f.res.NoOp++
	}
}

func (f *mqBatch) giveBack(rows []persistence.OutboxRow, fail *failure) {
	f.mu.Lock()
	for _, r := range rows {
		f.release = append(f.release, r.Envelope.EventID)
	}
	if fail != nil {
		f.res.Failed++
	}
	f.mu.Unlock()
	if fail != nil {
		if f.Metrics != nil {
			f.Metrics.Failure.Inc()
		}
		supervise.EventLogger(f.Logger, MQWorkerName, f.NodeID, fail.env).Warn("outbox mq publish failed: the room's rows wait for the next round",
			slog.String("status", persistence.OutboxMQPending), slog.String("error", supervise.ErrorText(fail.err)))
	}
}

func (f *mqBatch) park(env persistence.Envelope, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), storeTimeout)
	err := f.Store.ParkOutboxMQ(ctx, env.EventID)
	cancel()
	log := supervise.EventLogger(f.Logger, MQWorkerName, f.NodeID, env)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.res.StoreErrors++
		log.Error("outbox mq park failed: the row comes back after its lease", slog.String("store_error", supervise.ErrorText(err)))
		return
	}
	f.res.Parked++
	log.Error("outbox mq event parked: it can never be published to the topic as it is (the IM channel is not affected)",
		slog.String("status", persistence.OutboxMQParked), slog.String("error", supervise.ErrorText(cause)))
}

// settle writes the batch's marks: the successes in one write, the
// releases in one.
func (f *mqBatch) settle(res *MQResult) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), storeTimeout)
	defer cancel()
	*res = MQResult{Claimed: res.Claimed, NoOp: f.res.NoOp, Parked: f.res.Parked, Failed: f.res.Failed, StoreErrors: f.res.StoreErrors}
	if len(f.published) > 0 {
		if err := f.Store.MarkOutboxMQPublished(ctx, f.published, f.Clock().UnixMilli()); err != nil {
			res.StoreErrors += len(f.published)
			res.NoOp = 0
			f.Logger.Error("outbox mq mark published failed: the rows go to the topic again after their lease",
				slog.String("worker", MQWorkerName), slog.String("node_id", f.NodeID), slog.String("error", supervise.ErrorText(err)))
		} else {
			res.Published = len(f.published) - res.NoOp
			if f.Metrics != nil {
				f.Metrics.Success.Add(float64(res.Published))
			}
		}
	}
	if len(f.release) > 0 {
		if err := f.Store.ReleaseOutboxMQ(ctx, f.release); err != nil {
			f.Logger.Warn("outbox mq release failed: the rows wait for their lease", slog.String("worker", MQWorkerName),
				slog.String("node_id", f.NodeID), slog.String("error", supervise.ErrorText(err)))
		}
	}
}

// StartMQ spawns the MQ fanout as the child "room_outbox_mq" of sup, on the
// shared poller shell (restarted after any panic with backoff, counted in
// roomcell_worker_restarts_total, listed on /readyz while down). Kick
// on the poller asks for a round now (a room just wrote events; kicks
// while one is queued are merged); Stop lets publishes in flight have
// their publish_timeout and their marks.
func StartMQ(sup *supervise.Supervisor, deps MQDeps) (*supervise.Poller[MQResult], error) {
	d, err := deps.normalized()
	if err != nil {
		return nil, err
	}
	return supervise.StartPoller(sup, supervise.PollerSpec[MQResult]{Name: cmp.Or(d.Name, MQWorkerName), New: func() supervise.Round[MQResult] {
		owner := supervise.LeaseOwner(d.NodeID)
		return func(ctx context.Context) (time.Duration, MQResult) {
			res, err := processMQBatch(ctx, d, owner)
			if err != nil {
				d.Logger.Error("outbox mq batch failed: retrying next poll", slog.String("worker", MQWorkerName),
					slog.String("node_id", d.NodeID), slog.String("error", supervise.ErrorText(err)))
			}
			d.refreshGauge(ctx)
			if err == nil && res.Claimed >= d.Config.BatchSize && res.Failed+res.StoreErrors == 0 {
				return 0, res // a backlog drains at broker speed
			}
			return d.Config.PollInterval, res
		}
	}})
}

func (d MQDeps) refreshGauge(ctx context.Context) {
	st, ok := d.Store.(interface {
		OutboxStats(context.Context) (persistence.OutboxStats, error)
	})
	if d.Metrics == nil || !ok {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if s, err := st.OutboxStats(sctx); err == nil {
		d.Metrics.Pending.Set(float64(s.MQPending))
	}
}

// WithMQKick wraps the rooms' IM publisher so that every event a room
// hands it also kicks the MQ fanout (kick, typically MQFanout.Kick through
// a late-bound pointer): the fanout then takes the row at once instead of
// on its next poll. The kick comes first and whatever IM answers, since
// the row is already committed and the two channels are independent. An
// Enqueuer stays an Enqueuer, so the room keeps its queued, in-order
// publishing.
func WithMQKick(p Publisher, kick func()) Publisher {
	if q, ok := p.(Enqueuer); ok {
		return kickingEnqueuer{kickingPublisher{p, kick}, q}
	}
	return kickingPublisher{p, kick}
}

type kickingPublisher struct {
	p    Publisher
	kick func()
}

func (k kickingPublisher) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	k.kick()
	return k.p.PublishRoomEvent(ctx, env)
}

type kickingEnqueuer struct {
	kickingPublisher
	q Enqueuer
}

func (k kickingEnqueuer) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	k.kick()
	return k.q.Enqueue(ctx, env)
}
