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
	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/internal/tracing"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// MQWorkerName is the MQ fanout worker's actor name and `worker` log field.
const MQWorkerName = "room_outbox_mq"

// mqParallel bounds the rooms one fanout batch publishes at once. A room's
// rows go one after the other (its order on the topic), or, on a queue
// that takes batches (RocketMQ), in one request per room and round; the
// fanout's rate is about mqParallel × rows per request / one request's
// latency. RocketMQ one message a request drained a 5,000-event backlog
// in 100 rooms at a quarter of JetStream's rate on this machine; a batch
// per room brought it level (BenchmarkMQFanoutBacklog, docs/benchmarks.md).
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

// MQBatchPublisher is a message queue that takes a room's rows in one
// request (delivery/mq.OrderedBatchPublisher): the fanout hands it each
// room's rows of a round at once, in room_seq order, on the room's order
// key, and it reports how many, from the first, it stored.
type MQBatchPublisher interface {
	PublishOrderedBatch(ctx context.Context, topic, orderKey string, msgs []mq.Outgoing) (int, error)
}

// MQDeps is everything the MQ fanout worker uses. Store, MQ, Topic and a
// complete Config (as Load gives it, or configs.WithDefaults) are required.
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

// checked refuses missing dependencies and a Config that is not complete
// (the error names its key); it applies no configuration default, only the
// fallbacks that are not configuration.
func (d MQDeps) checked() (MQDeps, error) {
	if d.Store == nil || d.MQ == nil || d.Topic == "" {
		return d, errors.New("relay: the MQ fanout needs Store, MQ and Topic")
	}
	if err := d.Config.Validate(); err != nil {
		return d, err
	}
	supervise.Fallbacks(&d.Logger, &d.Clock)
	return d, nil
}

// MQResult counts what one fanout batch did.
type MQResult struct {
	Claimed   int
	Published int // stored by the broker and marked
	NoOp      int // events that never go to the topic, marked without a send
	Parked    int // can never be published as they are
	Failed    int // publish failed: released, tried again next round
	// HeldBack counts rows of the claim's last millisecond given back
	// unsent so that the next round takes each room's rows from its
	// lowest (see claimMQ).
	HeldBack int
	// StoreErrors counts marks that did not reach the store; the fanout
	// (StartMQ) marks those rows again before its next claim, and a round
	// does nothing else until that mark succeeds; rows no mark reached
	// come back when their lease expires (and go to the topic again,
	// stored once by the broker's duplicate window).
	StoreErrors int
}

// ProcessMQBatch is one round of the MQ fanout, the message-queue side of
// room_outbox: claim up to batch_size rows (see claimMQ) whose MQ
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
	d, err := deps.checked()
	if err != nil {
		return MQResult{}, err
	}
	return processMQBatch(ctx, d, owner, nil)
}

// mqHold remembers the rooms whose rows a fanout could not give back (the
// store refused the release): those rows keep their lease, and until it
// runs out the room's later rows must not reach the topic ahead of them.
// It also keeps the events the broker stored whose MQ-published mark did
// not reach the store (a lock wait past innodb_lock_wait_timeout behind
// the IM relay's writes to the same rows, a database pause): they are
// marked again before the next claim. Left to their lease, they would hold
// every room of their batch for lease_ttl, the whole fanout when the batch
// spanned all rooms. It lives as long as the worker, across its restarts.
type mqHold struct {
	mu       sync.Mutex
	until    map[persistence.RoomKey]int64
	unmarked []string
}

// addUnmarked keeps ids to mark again, at most maxUnmarked (the oldest
// are dropped: their rows come back after their lease and go to the topic
// again, stored once per key by the broker).
func (h *mqHold) addUnmarked(ids []string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unmarked = append(h.unmarked, ids...)
	if n := len(h.unmarked) - maxUnmarked; n > 0 {
		h.unmarked = slices.Clone(h.unmarked[n:])
	}
}

// remark marks the kept unmarked events MQ-published; false when the
// store refused (a claim now would most likely fail too).
func (h *mqHold) remark(ctx context.Context, d MQDeps) bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	ids := slices.Clone(h.unmarked)
	h.mu.Unlock()
	if len(ids) == 0 {
		return true
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	err := d.Store.MarkOutboxMQPublished(mctx, ids, d.Clock().UnixMilli())
	cancel()
	if err != nil {
		d.Logger.Warn("outbox mq mark published failed again; retrying next poll", slog.String("worker", MQWorkerName),
			slog.Int("events", len(ids)), slog.String("error", supervise.ErrorText(err)))
		return false
	}
	d.Logger.Info("outbox mq events marked published after the store refused", slog.String("worker", MQWorkerName),
		slog.Int("events", len(ids)))
	h.mu.Lock()
	h.unmarked = h.unmarked[min(len(ids), len(h.unmarked)):]
	h.mu.Unlock()
	return true
}

func newMQHold() *mqHold { return &mqHold{until: map[persistence.RoomKey]int64{}} }

func (h *mqHold) add(keys map[persistence.RoomKey]bool, untilMs int64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range keys {
		h.until[k] = max(h.until[k], untilMs)
	}
}

func (h *mqHold) unmarkedLen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.unmarked)
}

// split moves the rows of held rooms out of rows.
func (h *mqHold) split(rows []persistence.OutboxRow, nowMs int64) (keep, held []persistence.OutboxRow) {
	if h == nil {
		return rows, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, until := range h.until {
		if until <= nowMs {
			delete(h.until, k)
		}
	}
	if len(h.until) == 0 {
		return rows, nil
	}
	keep = rows[:0:0]
	for _, r := range rows {
		if _, ok := h.until[persistence.RoomKey{AppCode: r.Envelope.AppCode, RoomID: r.Envelope.RoomID}]; ok {
			held = append(held, r)
		} else {
			keep = append(keep, r)
		}
	}
	return keep, held
}

func processMQBatch(ctx context.Context, d MQDeps, owner string, hold *mqHold) (MQResult, error) {
	var res MQResult
	if ctx.Err() != nil {
		return res, nil
	}
	if !hold.remark(ctx, d) {
		res.StoreErrors = hold.unmarkedLen()
		return res, nil
	}
	rows, held, err := claimMQ(ctx, d, owner, hold)
	if err != nil {
		if ctx.Err() != nil {
			return res, nil
		}
		return res, fmt.Errorf("relay: claim outbox mq: %w", err)
	}
	rows, stuck := hold.split(rows, d.Clock().UnixMilli())
	held = append(held, stuck...)
	res.Claimed = len(rows) + len(held)
	f := &mqBatch{MQDeps: d, ctx: ctx, hold: hold}
	for _, row := range held {
		f.releaseRow(row.Envelope)
	}
	f.res.HeldBack = len(held)
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

// mqMaxClaim bounds the claim claimMQ widens when a whole claim shares one
// created_at_ms.
const mqMaxClaim = 20000

// claimMQ claims a round's rows so that each room's rows in it are the
// lowest of its pending ones. The store now claims whole rooms (a room's
// lowest MQ-pending rows in room_seq order, never a room another owner or
// this one still holds), which guarantees that by itself; the give-back
// below dates from the claim by (created_at_ms, event_id), where event ids
// do not sort by room_seq ("...:10:0" before "...:9:0") and a full claim
// could cut a room's rows of its last millisecond after a later room_seq.
// It is kept as a second guard: the rows of a full claim's last
// millisecond are given back (held) for the next round, which claims them
// together; a claim that is all one millisecond is given back and taken
// again wider, up to mqMaxClaim rows. A room's rows are created in
// room_seq order (its commands commit one after the other), so what is
// given back is the end of each room's part and the rest stays a prefix.
func claimMQ(ctx context.Context, d MQDeps, owner string, hold *mqHold) (rows, held []persistence.OutboxRow, err error) {
	limit := d.Config.BatchSize
	for {
		cctx, cancel := context.WithTimeout(ctx, storeTimeout)
		rows, err = d.Store.ClaimOutboxMQ(cctx, owner, d.Clock().UnixMilli(), d.Config.LeaseTTL.Milliseconds(), limit)
		cancel()
		if err != nil || len(rows) < limit {
			return rows, nil, err
		}
		last := rows[0].CreatedAtMs
		for _, r := range rows {
			last = max(last, r.CreatedAtMs)
		}
		keep := make([]persistence.OutboxRow, 0, len(rows))
		for _, r := range rows {
			if r.CreatedAtMs < last {
				keep = append(keep, r)
			} else {
				held = append(held, r)
			}
		}
		if len(keep) > 0 || limit >= mqMaxClaim {
			if len(keep) == 0 {
				return rows, nil, nil
			}
			return keep, held, nil
		}
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.Envelope.EventID
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		err = d.Store.ReleaseOutboxMQ(rctx, ids)
		cancel()
		if err != nil {
			// The rows keep their lease and come back after it; their
			// rooms wait for them.
			hold.add(roomKeys(rows), d.Clock().UnixMilli()+d.Config.LeaseTTL.Milliseconds())
			return nil, nil, err
		}
		held = nil
		limit = min(limit*4, mqMaxClaim)
	}
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
		if !slices.Contains(f.published, row.Envelope.EventID) {
			f.releaseRowLocked(row.Envelope)
		}
	}
}

// releaseRow gives a row back at settle time.
func (f *mqBatch) releaseRow(env persistence.Envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseRowLocked(env)
}

func (f *mqBatch) releaseRowLocked(env persistence.Envelope) {
	f.release = append(f.release, env.EventID)
	if f.releaseRooms == nil {
		f.releaseRooms = map[persistence.RoomKey]bool{}
	}
	f.releaseRooms[persistence.RoomKey{AppCode: env.AppCode, RoomID: env.RoomID}] = true
}

func roomKeys(rows []persistence.OutboxRow) map[persistence.RoomKey]bool {
	keys := map[persistence.RoomKey]bool{}
	for _, r := range rows {
		keys[persistence.RoomKey{AppCode: r.Envelope.AppCode, RoomID: r.Envelope.RoomID}] = true
	}
	return keys
}

type mqBatch struct {
	MQDeps
	ctx  context.Context
	hold *mqHold

	mu        sync.Mutex
	published []string
	release   []string
	// releaseRooms are the rooms of release, held when it fails.
	releaseRooms map[persistence.RoomKey]bool
	res          MQResult
	panic        *supervise.PanicError
}

// room publishes one room's rows in order and stops at its first failure:
// in one batch when the queue takes batches, else one row after the other.
func (f *mqBatch) room(rows []persistence.OutboxRow) {
	if bp, ok := f.MQ.(MQBatchPublisher); ok {
		f.roomBatch(bp, rows)
		return
	}
	f.roomOneByOne(rows)
}

func (f *mqBatch) roomOneByOne(rows []persistence.OutboxRow) {
	for i, row := range rows {
		env := row.Envelope
		if f.ctx.Err() != nil {
			f.giveBack(rows[i:], nil)
			return
		}
		data, send, err := f.prepare(env)
		if !send {
			continue
		}
		if err == nil {
			err = f.publish(env, data)
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

// roomBatch sends the room's rows that go to the topic in one
// PublishOrderedBatch (the order key's queue, in room_seq order), after
// marking the ones that never go there and parking the ones that never
// can. The rows the broker stored are marked; from the first one it may
// not have stored, the room's rows are released for the next round,
// which sends them again in order (a duplicate, if it was stored after
// all, that consumers absorb by event_id). A batch the broker refuses as
// it is (too large) goes row by row instead, which parks the culprit
// alone.
func (f *mqBatch) roomBatch(bp MQBatchPublisher, rows []persistence.OutboxRow) {
	send := make([]persistence.OutboxRow, 0, len(rows))
	msgs := make([]mq.Outgoing, 0, len(rows))
	for _, row := range rows {
		env := row.Envelope
		data, ok, err := f.prepare(env)
		if !ok {
			continue
		}
		if err != nil {
			f.park(env, err)
			continue
		}
		send = append(send, row)
		msgs = append(msgs, mq.Outgoing{Tag: env.EventType, Key: env.EventID, Data: data})
	}
	if len(send) == 0 {
		return
	}
	if f.ctx.Err() != nil {
		f.giveBack(send, nil)
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), f.Config.PublishTimeout)
	start := time.Now()
	pctx, span := publishSpan(pctx, f.Topic, send...) // tracing.go
	n, err := bp.PublishOrderedBatch(pctx, f.Topic, OrderKey(send[0].Envelope), msgs)
	tracing.End(span, err)
	cancel()
	if f.Metrics != nil {
		f.Metrics.Latency.Observe(time.Since(start).Seconds())
	}
	n = max(0, min(n, len(send)))
	for _, row := range send[:n] {
		f.done(row.Envelope.EventID, true)
	}
	switch rest := send[n:]; {
	case err == nil && len(rest) == 0:
	case err == nil:
		f.giveBack(rest, &failure{env: rest[0].Envelope, err: errors.New("the queue stored only part of the batch")})
	case parkable(err):
		f.roomOneByOne(rest)
	default:
		f.giveBack(rest, &failure{env: rest[0].Envelope, err: err})
	}
}

// prepare is a row's message body. send is false for an event that never
// goes to the topic, which it marks done; err says the row can never be
// published as it is (to be parked).
func (f *mqBatch) prepare(env persistence.Envelope) (data []byte, send bool, err error) {
	if err := checkEnvelope(env); err != nil {
		return nil, true, err
	}
	if !fannedOut(env) {
		f.done(env.EventID, false)
		return nil, false, nil
	}
	data, err = encode(env)
	return data, true, err
}

// fannedOut reports whether env goes to the topic: its row in the event
// registry says MQ (room/event.go); the others (RoomHeatChanged,
// RoomRankChanged, Tencent's audio bookkeeping) are marked without a send.
func fannedOut(env persistence.Envelope) bool { return room.Causes(env.EventType, room.MQ) }

type failure struct {
	env persistence.Envelope
	err error
}

// leaseMs is lease_ttl in milliseconds.
func (d MQDeps) leaseMs() int64 { return d.Config.LeaseTTL.Milliseconds() }

// encode is the message body: the envelope's JSON.
func encode(env persistence.Envelope) ([]byte, error) {
	data, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptEnvelope, err)
	}
	return data, nil
}

func (f *mqBatch) publish(env persistence.Envelope, data []byte) error {
	// The stop request cancels between rows; a publish in flight gets its
	// publish_timeout.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), f.Config.PublishTimeout)
	defer cancel()
	start := time.Now()
	pctx, span := publishSpan(pctx, f.Topic, persistence.OutboxRow{Envelope: env}) // tracing.go
	var err error
	defer func() { tracing.End(span, err) }()
	if op, ok := f.MQ.(MQOrderedPublisher); ok {
		err = op.PublishOrdered(pctx, f.Topic, env.EventType, env.EventID, OrderKey(env), data)
	} else {
		err = f.MQ.Publish(pctx, f.Topic, env.EventType, env.EventID, data)
	}
	if f.Metrics != nil {
		f.Metrics.Latency.Observe(time.Since(start).Seconds())
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
		f.releaseRowLocked(r.Envelope)
	}
	if fail != nil {
		f.res.Failed++
	}
	f.mu.Unlock()
	if fail != nil {
		if f.Metrics != nil {
			f.Metrics.Failure.Inc()
		}
		supervise.EventLogger(f.Logger, MQWorkerName, fail.env).Warn("outbox mq publish failed: the room's rows wait for the next round",
			slog.String("status", persistence.OutboxMQPending), slog.String("error", supervise.ErrorText(fail.err)))
	}
}

func (f *mqBatch) park(env persistence.Envelope, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), storeTimeout)
	err := f.Store.ParkOutboxMQ(ctx, env.EventID)
	cancel()
	log := supervise.EventLogger(f.Logger, MQWorkerName, env)
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
	*res = MQResult{Claimed: res.Claimed, NoOp: f.res.NoOp, Parked: f.res.Parked, Failed: f.res.Failed, StoreErrors: f.res.StoreErrors,
		HeldBack: f.res.HeldBack}
	if len(f.published) > 0 {
		if err := f.Store.MarkOutboxMQPublished(ctx, f.published, f.Clock().UnixMilli()); err != nil {
			res.StoreErrors += len(f.published)
			f.hold.addUnmarked(f.published)
			res.NoOp = 0
			f.Logger.Error("outbox mq mark published failed: marked again before the next claim (or sent again after their lease)",
				slog.String("worker", MQWorkerName), slog.String("error", supervise.ErrorText(err)))
		} else {
			res.Published = len(f.published) - res.NoOp
			if f.Metrics != nil {
				f.Metrics.Success.Add(float64(res.Published))
			}
		}
	}
	if len(f.release) > 0 {
		if err := f.Store.ReleaseOutboxMQ(ctx, f.release); err != nil {
			// The rows keep their lease; their rooms' later rows wait
			// for them (mqHold) so as not to pass them on the topic.
			f.hold.add(f.releaseRooms, f.Clock().UnixMilli()+f.leaseMs())
			f.Logger.Warn("outbox mq release failed: the rows wait for their lease, their rooms with them", slog.String("worker", MQWorkerName),
				slog.String("error", supervise.ErrorText(err)))
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
	d, err := deps.checked()
	if err != nil {
		return nil, err
	}
	hold := newMQHold()
	return supervise.StartPoller(sup, supervise.PollerSpec[MQResult]{Name: cmp.Or(d.Name, MQWorkerName), New: func() supervise.Round[MQResult] {
		owner := supervise.LeaseOwner(d.NodeID)
		return func(ctx context.Context) (time.Duration, MQResult) {
			res, err := processMQBatch(ctx, d, owner, hold)
			if err != nil {
				d.Logger.Error("outbox mq batch failed: retrying next poll", slog.String("worker", MQWorkerName),
					slog.String("error", supervise.ErrorText(err)))
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
func WithMQKick(p delivery.Publisher, kick func()) delivery.Publisher {
	if q, ok := p.(delivery.Enqueuer); ok {
		return kickingEnqueuer{kickingPublisher{p, kick}, q}
	}
	return kickingPublisher{p, kick}
}

type kickingPublisher struct {
	p    delivery.Publisher
	kick func()
}

func (k kickingPublisher) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	k.kick()
	return k.p.PublishRoomEvent(ctx, env)
}

type kickingEnqueuer struct {
	kickingPublisher
	q delivery.Enqueuer
}

func (k kickingEnqueuer) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	k.kick()
	return k.q.Enqueue(ctx, env)
}
