package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hyapp/roomcell/actors/room"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// WorkerName is the seed's `worker` log field and the actor's name.
const WorkerName = "room_outbox"

// storeTimeout bounds each store call of a batch. Store writes after a
// publish run even when the relay is being stopped (the seed lets an
// in-flight event finish its mark), so they need their own deadline.
const storeTimeout = 5 * time.Second

// maxClaimRounds bounds how often one batch claims again when the
// exponential strategy skipped rows that are not yet due.
const maxClaimRounds = 4

// ErrCorruptEnvelope classifies an envelope that can never be published as
// it is (unknown event type, payload that does not decode, missing room).
// A Publisher wraps it when it finds such an envelope; the relay also
// checks every envelope itself before publishing.
var ErrCorruptEnvelope = errors.New("corrupt envelope")

// Publisher sends one room event to the room's IM group. It must honour
// ctx's deadline: the relay gives each event publish_timeout.
type Publisher interface {
	PublishRoomEvent(ctx context.Context, env persistence.Envelope) error
}

// Deps is everything the relay uses. Store, Publisher and Config are
// required; the rest have defaults.
type Deps struct {
	Store     persistence.OutboxStore
	Publisher Publisher
	Config    configs.OutboxWorkerConfig
	NodeID    string
	Logger    *slog.Logger // default: slog.Default()
	Metrics   *Metrics     // nil: no metrics
	Clock     func() time.Time
	// Owner is the lease owner written into claimed rows. Empty: a fresh
	// "<NodeID>/<random>" per ProcessBatch call. The actor sets one per
	// incarnation, so a crashed incarnation's leases are not inherited by
	// its successor but expire.
	Owner string
}

func (d Deps) normalized() (Deps, error) {
	if d.Store == nil || d.Publisher == nil {
		return d, errors.New("relay: Store and Publisher are required")
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
	if d.Owner == "" {
		d.Owner = supervise.LeaseOwner(d.NodeID)
	}
	return d, nil
}

// Result counts what one batch did.
type Result struct {
	Claimed   int // rows leased from the store
	Published int // published to IM and marked published
	NoOp      int // non-IM events marked published without a send
	Failed    int // publish failed: retry_count+1, still pending
	Corrupt   int // envelope can never be published as is: marked failed, still pending
	Deferred  int // exponential strategy: not due yet, not attempted
	// Unattempted rows were claimed but left alone because the relay is
	// stopping; their leases are released.
	Unattempted int
	// StoreErrors counts marks that did not reach the store; those rows
	// come back when their lease expires.
	StoreErrors int
}

// ProcessBatch is one round of the relay, without an actor (the seed's
// ProcessPendingOutbox): claim up to batch_size pending rows under a lease,
// publish each with its own publish_timeout, mark it published or failed,
// and go on with the next row whatever happened to this one. Rows named in
// force are attempted even when the exponential strategy would still wait
// (operator "retry now").
//
// Cancelling ctx stops the batch between rows: the row being published
// still gets its publish_timeout and its mark, the rest are released. The
// error is non-nil only when the batch could not run at all (bad Deps or
// config, claim failed); per-row problems are logged and counted.
//
// A panic in the Publisher is not recovered: the rows after it are released
// and the panic goes on (wrapped in a *supervise.PanicError with its stack)
// to the actor's supervisor. The row that panicked keeps its lease, so it
// comes back after lease_ttl instead of crash-looping the relay.
func ProcessBatch(ctx context.Context, deps Deps, force ...string) (Result, error) {
	d, err := deps.normalized()
	if err != nil {
		return Result{}, err
	}
	b := &batch{Deps: d, ctx: ctx, force: make(map[string]bool, len(force))}
	for _, id := range force {
		b.force[id] = true
	}
	if d.Metrics != nil {
		d.Metrics.Batches.Inc()
	}
	err = b.run()
	b.refreshGauges()
	return b.res, err
}

type batch struct {
	Deps
	ctx   context.Context
	force map[string]bool
	res   Result
	// unstarted holds claimed rows not yet attempted; released if the
	// batch ends early (stop or panic).
	unstarted []persistence.OutboxRow
	// held are skipped rows due before our lease ends: released at the end
	// so the next poll can take them. Skipped rows due later keep the lease,
	// which keeps them out of the next claims' way until it expires.
	held []string
}

func (b *batch) run() error {
	defer func() {
		r := recover()
		if r != nil {
			b.release(b.unstarted)
		}
		b.releaseIDs(b.held)
		b.held = nil
		if r != nil {
			supervise.Repanic(r)
		}
	}()

	cfg := b.Config
	attempted := 0
	var queued []*inflight
	// A panic or an early return must still settle what was queued: those
	// events are in the publisher's hands and get their marks.
	defer func() { b.settleAll(queued) }()
	for round := 0; round < maxClaimRounds && attempted < cfg.BatchSize; round++ {
		if b.ctx.Err() != nil {
			return nil
		}
		now := b.Clock()
		limit := cfg.BatchSize - attempted
		cctx, cancel := context.WithTimeout(b.ctx, storeTimeout)
		rows, err := b.Store.ClaimPendingOutbox(cctx, b.Owner, now.UnixMilli(), cfg.LeaseTTL.Milliseconds(), limit)
		cancel()
		if err != nil {
			if b.ctx.Err() != nil {
				return nil
			}
			b.Logger.Error("outbox claim failed", slog.String("worker", WorkerName),
				slog.String("node_id", b.NodeID), slog.String("error", supervise.ErrorText(err)))
			return fmt.Errorf("relay: claim pending outbox: %w", err)
		}
		b.res.Claimed += len(rows)
		leaseEnd := now.Add(cfg.LeaseTTL)
		skipped := 0
		b.unstarted = rows
		for len(b.unstarted) > 0 {
			row := b.unstarted[0]
			if b.ctx.Err() != nil {
				b.res.Unattempted += len(b.unstarted)
				b.release(b.unstarted)
				b.unstarted = nil
				return nil
			}
			b.unstarted = b.unstarted[1:]
			if due := dueAt(cfg, row); due.After(now) && !b.force[row.Envelope.EventID] {
				skipped++
				b.res.Deferred++
				if due.Before(leaseEnd) {
					b.held = append(b.held, row.Envelope.EventID)
				}
				continue
			}
			attempted++
			if inflight := b.publishOne(row); inflight != nil {
				queued = append(queued, inflight)
			}
		}
		b.settleAll(queued)
		queued = nil
		// Another round only helps when skipped rows filled the claim:
		// then newer rows may be waiting behind them.
		if len(rows) < limit || skipped == 0 {
			break
		}
	}
	return nil
}

// Enqueuer is a Publisher that can queue an event and report later: the
// relay queues a whole claim at once (the publisher keeps each room's order
// and may merge a busy room's events into one message) instead of waiting
// for each send in turn.
type Enqueuer interface {
	Enqueue(ctx context.Context, env persistence.Envelope) <-chan error
}

// inflight is a queued publish waiting for its result.
type inflight struct {
	row    persistence.OutboxRow
	log    *slog.Logger
	done   <-chan error
	cancel context.CancelFunc
	start  time.Time
}

// publishOne handles one row from check to mark, or queues it and returns
// the inflight publish for settleAll. It never returns an error: a row's
// outcome is logged, counted and stored, and the batch goes on.
func (b *batch) publishOne(row persistence.OutboxRow) *inflight {
	env := row.Envelope
	log := supervise.EventLogger(b.Logger, WorkerName, b.NodeID, env)
	if err := checkEnvelope(env); err != nil {
		b.fail(log, row, err)
		return nil
	}
	// RoomCreated is not a message but the IM group's idempotent creation
	// (seed 003: the outbox compensates a failed create in the command
	// path), so it goes to the publisher like the IM events.
	if !room.IsIMEvent(env.EventType) && env.EventType != room.TypeRoomCreated {
		// Seed 000: RoomHeatChanged, RoomRankChanged are a no-op success;
		// marking them keeps them from staying pending.
		if b.markPublished(log, row) {
			b.res.NoOp++
		}
		return nil
	}
	// The publish may finish after a stop request (the seed lets the
	// in-flight event complete), so it only inherits ctx's values.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.Config.PublishTimeout)
	start := time.Now()
	if q, ok := b.Publisher.(Enqueuer); ok {
		return &inflight{row: row, log: log, done: q.Enqueue(pctx, env), cancel: cancel, start: start}
	}
	err := b.Publisher.PublishRoomEvent(pctx, env)
	cancel()
	b.settle(log, row, start, err)
	return nil
}

// settleAll waits for queued publishes in order, records failures one by
// one and marks the successes published in one store write: with a commit
// per row, marking would cap the relay at the store's commit rate.
func (b *batch) settleAll(queued []*inflight) {
	var ok []*inflight
	for _, f := range queued {
		err := <-f.done
		f.cancel()
		if b.Metrics != nil {
			b.Metrics.Latency.Observe(float64(time.Since(f.start).Microseconds()) / 1000)
		}
		if err != nil {
			b.fail(f.log, f.row, err)
			continue
		}
		ok = append(ok, f)
	}
	if len(ok) == 0 {
		return
	}
	ids := make([]string, len(ok))
	for i, f := range ok {
		ids[i] = f.row.Envelope.EventID
	}
	ctx, cancel := b.storeCtx()
	err := b.Store.MarkOutboxPublishedBatch(ctx, ids, b.Clock().UnixMilli())
	cancel()
	for _, f := range ok {
		if err != nil {
			b.markFailedToStore(f.log, f.row, err)
			continue
		}
		b.logPublished(f.log, f.row)
		b.res.Published++
	}
}

func (b *batch) settle(log *slog.Logger, row persistence.OutboxRow, start time.Time, err error) {
	if b.Metrics != nil {
		b.Metrics.Latency.Observe(float64(time.Since(start).Microseconds()) / 1000)
	}
	if err != nil {
		b.fail(log, row, err)
		return
	}
	if b.markPublished(log, row) {
		b.res.Published++
	}
}

// checkEnvelope finds envelopes no publish attempt can fix.
func checkEnvelope(env persistence.Envelope) error {
	if env.EventID == "" || env.EventType == "" || env.AppCode == "" || env.RoomID == "" {
		return fmt.Errorf("%w: missing event_id, event_type, app_code or room_id", ErrCorruptEnvelope)
	}
	if _, err := room.DecodeEvent(env.EventType, env.Payload); err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptEnvelope, err)
	}
	return nil
}

func (b *batch) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(b.ctx), storeTimeout)
}

func (b *batch) markPublished(log *slog.Logger, row persistence.OutboxRow) bool {
	ctx, cancel := b.storeCtx()
	defer cancel()
	if err := b.Store.MarkOutboxPublished(ctx, row.Envelope.EventID, b.Clock().UnixMilli()); err != nil {
		b.markFailedToStore(log, row, err)
		return false
	}
	b.logPublished(log, row)
	return true
}

func (b *batch) markFailedToStore(log *slog.Logger, row persistence.OutboxRow, err error) {
	b.res.StoreErrors++
	log.Error("outbox mark published failed: the row will be published again after its lease",
		slog.Int("retry_count", row.RetryCount), slog.String("status", persistence.OutboxPending),
		slog.String("error", supervise.ErrorText(err)))
}

func (b *batch) logPublished(log *slog.Logger, row persistence.OutboxRow) {
	if b.Metrics != nil {
		b.Metrics.Success.Inc()
	}
	// A compensation after failures is news; a first-try success is not.
	level := slog.LevelDebug
	if row.RetryCount > 0 {
		level = slog.LevelInfo
	}
	log.Log(context.Background(), level, "outbox event published",
		slog.Int("retry_count", row.RetryCount), slog.String("status", persistence.OutboxPublished),
		slog.String("error", ""))
}

// fail records a failed attempt: retry_count+1 and last_error, the row
// stays pending and is retried forever (the seed has no dead letter here).
func (b *batch) fail(log *slog.Logger, row persistence.OutboxRow, cause error) {
	text := supervise.ErrorText(cause)
	corrupt := errors.Is(cause, ErrCorruptEnvelope)
	if b.Metrics != nil {
		b.Metrics.Failure.Inc()
	}
	ctx, cancel := b.storeCtx()
	defer cancel()
	retry := row.RetryCount + 1
	if err := b.Store.MarkOutboxFailed(ctx, row.Envelope.EventID, text, b.Clock().UnixMilli()); err != nil {
		b.res.StoreErrors++
		retry = row.RetryCount
		log.Error("outbox mark failed failed: the row will be retried after its lease",
			slog.String("store_error", supervise.ErrorText(err)))
	}
	if corrupt {
		b.res.Corrupt++
		log.Error("outbox envelope is corrupt: it stays pending until an operator fixes it",
			slog.Int("retry_count", retry), slog.String("status", persistence.OutboxPending), slog.String("error", text))
		return
	}
	b.res.Failed++
	log.Warn("outbox publish failed: retrying next poll",
		slog.Int("retry_count", retry), slog.String("status", persistence.OutboxPending), slog.String("error", text))
}

func (b *batch) release(rows []persistence.OutboxRow) {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.Envelope.EventID
	}
	b.releaseIDs(ids)
}

// releaseIDs gives leases back early. Failing here costs only a delay (the
// lease expires by itself), so errors are logged, not returned.
func (b *batch) releaseIDs(ids []string) {
	for _, id := range ids {
		ctx, cancel := b.storeCtx()
		err := b.Store.ReleaseOutbox(ctx, id)
		cancel()
		if err != nil {
			b.Logger.Warn("outbox release failed: the row waits for its lease to expire",
				slog.String("worker", WorkerName), slog.String("node_id", b.NodeID),
				slog.String("event_id", id), slog.String("error", supervise.ErrorText(err)))
		}
	}
}

func (b *batch) refreshGauges() {
	if b.Metrics == nil {
		return
	}
	ctx, cancel := b.storeCtx()
	defer cancel()
	st, err := b.Store.OutboxStats(ctx)
	if err != nil {
		b.Logger.Warn("outbox stats failed", slog.String("worker", WorkerName),
			slog.String("node_id", b.NodeID), slog.String("error", supervise.ErrorText(err)))
		return
	}
	b.Metrics.Pending.Set(float64(st.Pending))
	age := 0.0
	if st.OldestCreatedAtMs > 0 {
		age = float64(max(0, b.Clock().UnixMilli()-st.OldestCreatedAtMs))
	}
	b.Metrics.OldestPendingAge.Set(age)
}
