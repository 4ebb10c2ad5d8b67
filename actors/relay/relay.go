package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// WorkerName is the seed's `worker` log field and the actor's name.
const WorkerName = "room_outbox"

// storeTimeout bounds each store call of a batch. Store writes after a
// publish run even when the relay is being stopped (the seed lets an
// in-flight event finish its mark), so they need their own deadline.
const storeTimeout = 5 * time.Second

// ErrCorruptEnvelope classifies an envelope that can never be published as
// it is (unknown event type, payload that does not decode, missing room).
// A Publisher wraps it when it finds such an envelope; the relay also
// checks every envelope itself before publishing.
var ErrCorruptEnvelope = errors.New("corrupt envelope")

// permanent is implemented by publish errors no retry can fix as the event
// stands (IM refuses the message itself: bad request, content, rejected).
// Rows failing so are parked. Outages, timeouts, rate limits, auth and
// configuration errors are not permanent: those rows are retried forever.
type permanent interface{ Permanent() bool }

// parkable reports whether err means the row can never succeed as it is.
func parkable(err error) bool {
	var p permanent
	return errors.Is(err, ErrCorruptEnvelope) || (errors.As(err, &p) && p.Permanent())
}

// Deps is everything the relay uses. Store, Publisher and a complete
// Config (as Load gives it, or configs.WithDefaults) are required;
// Logger, Clock and Owner have fallbacks.
type Deps struct {
	Store     persistence.OutboxStore
	Publisher delivery.Publisher
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
	// Name is the worker's name under its supervisor; "" = WorkerName.
	// A process with several room databases runs a relay per database,
	// each named for its database.
	Name string
}

// checked refuses missing dependencies and a Config that is not complete
// (the error names its key); it applies no configuration default, only the
// fallbacks that are not configuration.
func (d Deps) checked() (Deps, error) {
	if d.Store == nil || d.Publisher == nil {
		return d, errors.New("relay: Store and Publisher are required")
	}
	if err := d.Config.Validate(); err != nil {
		return d, err
	}
	supervise.Fallbacks(&d.Logger, &d.Clock)
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
	Failed    int // publish failed: retry_count+1, still pending, due again per the retry strategy
	Parked    int // can never succeed as it is (corrupt envelope, permanent IM error): parked
	// Unattempted rows were claimed but left alone, their leases released:
	// the relay is stopping, or an earlier event of their room failed.
	Unattempted int
	// StoreErrors counts marks that did not reach the store; those rows
	// come back when their lease expires.
	StoreErrors int
	// Limit is the claim's row limit (batch_size, more while a room has a
	// backlog); HotRoomRows the most rows one room had in the claim.
	Limit       int
	HotRoomRows int
}

// ProcessBatch is one round of the relay, without an actor (the seed's
// ProcessPendingOutbox): claim up to batch_size due pending rows, room by
// room (persistence.OutboxStore.ClaimPendingOutbox: one owner per room, a
// room's rows in room_seq order), publish them with publish_timeout each,
// and mark each published, failed (due again per the retry strategy) or
// parked. Rooms go in parallel when the Publisher is an Enqueuer; inside a
// room the first failure ends the room's turn: its later rows are released
// unsent, so they never reach IM before it. Other rooms go on.
//
// Cancelling ctx stops the batch between rows: a publish in flight still
// gets its publish_timeout and its mark, the rest are released. The error
// is non-nil only when the batch could not run at all (bad Deps or config,
// claim failed); per-row problems are logged and counted.
//
// A panic in the Publisher is not recovered: the rows after it are released
// and the panic goes on (wrapped in a *supervise.PanicError with its stack)
// to the actor's supervisor. The row that panicked keeps its lease, so it
// comes back after lease_ttl instead of crash-looping the relay.
//
// ProcessBatch checks deps itself (callers that build them in code); the
// relay actor checks them once in Start and runs processBatch.
func ProcessBatch(ctx context.Context, deps Deps) (Result, error) {
	d, err := deps.checked()
	if err != nil {
		return Result{}, err
	}
	return processBatch(ctx, d, d.Config.BatchSize, &carry{})
}

// maxUnmarked bounds the published-but-unmarked event ids a relay keeps
// to mark again; past it the oldest are dropped (their rows come back
// after their lease and are sent again, as before).
const maxUnmarked = 20_000

// gaugeEvery is the least time between two reads of the outbox gauges
// (OutboxStats): a relay draining a backlog runs batches back to back.
const gaugeEvery = time.Second

// carry is what one relay incarnation keeps from batch to batch.
type carry struct {
	// unmarked are events IM accepted whose published mark did not reach
	// the store (a database pause). They are marked again before the next
	// claim instead of waiting out their lease: until marked, their rooms
	// are held by this relay and they would be sent again.
	unmarked  []string
	lastGauge time.Time
	// mu guards unmarked: a pipelined claim and the settle of the claim
	// before it both record marks that failed.
	mu sync.Mutex
	// clean: the last round claimed rows and nothing of it failed. Only
	// then does a round claim ahead: a claim sent before the one before it
	// is settled would, in an IM outage, send a second claim's worth of
	// rows into it before the relay sees the failures and waits for the
	// poll.
	clean bool
}

// processBatch is one round with deps already checked (the running
// relay never re-applies defaults), claiming up to limit rows a claim.
// While a full claim spread over many rooms is being settled (results read,
// published marks written) the next claim runs: a pipeline of up to
// pipelineDepth claims, one settling while the next is sent.
func processBatch(ctx context.Context, d Deps, limit int, c *carry) (Result, error) {
	b := &batch{Deps: d, ctx: ctx, res: Result{Limit: limit}, carry: c}
	if d.Metrics != nil {
		d.Metrics.Batches.Inc()
	}
	if !b.remark() {
		// The store still refuses writes: a claim now would fail too.
		b.res.StoreErrors = len(c.unmarked)
		b.refreshGauges()
		return b.res, nil
	}
	rooms, err := b.start()
	if err != nil {
		b.settleRooms(rooms)
		b.refreshGauges()
		return b.res, err
	}
	total := b.pipeline(rooms, c.clean)
	c.clean = total.Claimed > 0 && total.Failed+total.StoreErrors+total.Unattempted == 0
	b.refreshGauges()
	return total, nil
}

// pipelineDepth bounds the claims of one round; the round's result then
// goes to the poller, which starts the next round at once after a clean
// one.
const pipelineDepth = 8

// pipeline settles the claim b started; while it settles, the next claim
// is taken and sent under an owner of its own (the relay's owner with the
// claim's number), so it takes no room b still holds: the store gives a
// room to one owner at a time, and b's rows stay leased to b's owner until
// marked, failed or released. A room's rows are therefore never in two
// claims at once, and once b's marks are in, its rooms' later rows are
// claimed in order. A claim goes ahead only after a full claim that no
// single room dominated (a hot room's next rows are held by the claim
// before, so a claim ahead would find nothing) and only while nothing
// failed, in this round and the last (ahead). A claim ahead walks the due
// rows from where the claim before it stopped (a store that is a
// persistence.OutboxClaimResumer): the rows before are that claim's, of
// rooms it holds, or of rooms it found held; the round's first claim walks
// from the oldest row, so a room passed over while held is served by the
// next round. The result adds up the claims that took rows.
func (b *batch) pipeline(rooms []*roomTurn, ahead bool) Result {
	total := Result{Limit: b.res.Limit}
	cur, curRooms := b, rooms
	for n := 1; ; n++ {
		ahead := ahead && n < pipelineDepth && cur.ctx.Err() == nil && cur.res.Claimed >= cur.res.Limit &&
			2*cur.res.HotRoomRows < cur.res.Limit && cur.res.Unattempted == 0
		if !ahead {
			cur.settleRooms(curRooms)
			total.add(cur.res, n == 1)
			return total
		}
		settled := make(chan *supervise.PanicError, 1)
		go func() {
			defer func() {
				var p *supervise.PanicError
				if r := recover(); r != nil {
					p = &supervise.PanicError{Value: r, Stack: debug.Stack()}
				}
				settled <- p
			}()
			cur.settleRooms(curRooms)
		}()
		d := cur.Deps
		d.Owner = fmt.Sprintf("%s/%d", b.Owner, n)
		next := &batch{Deps: d, ctx: cur.ctx, res: Result{Limit: cur.res.Limit}, carry: cur.carry, from: cur.reached}
		if d.Metrics != nil {
			d.Metrics.Batches.Inc()
		}
		nextRooms, err := func() (r []*roomTurn, err error) {
			// A panic sending the next claim waits for the settle in
			// flight, so its marks are written before the actor restarts.
			defer func() {
				if p := recover(); p != nil {
					<-settled
					supervise.Repanic(p)
				}
			}()
			return next.start()
		}()
		if p := <-settled; p != nil {
			next.settleRooms(nextRooms)
			supervise.Repanic(p)
		}
		total.add(cur.res, n == 1)
		if err != nil || cur.res.Failed+cur.res.StoreErrors+cur.res.Unattempted > 0 {
			// The claim ahead failed (logged; the next round tries again)
			// or the one before did: settle what was sent and stop.
			next.settleRooms(nextRooms)
			total.add(next.res, false)
			return total
		}
		cur, curRooms = next, nextRooms
	}
}

// add counts r, a claim of the same round, into t. A claim that took no
// rows adds nothing: its limit does not make the round look partial.
func (t *Result) add(r Result, first bool) {
	if first {
		*t = r
		return
	}
	if r.Claimed == 0 {
		return
	}
	t.Claimed += r.Claimed
	t.Published += r.Published
	t.NoOp += r.NoOp
	t.Failed += r.Failed
	t.Parked += r.Parked
	t.Unattempted += r.Unattempted
	t.StoreErrors += r.StoreErrors
	t.Limit += r.Limit
	t.HotRoomRows = max(t.HotRoomRows, r.HotRoomRows)
}

// remark marks the carried unmarked events published; false when the
// store refused.
func (b *batch) remark() bool {
	if len(b.carry.unmarked) == 0 {
		return true
	}
	ctx, cancel := b.storeCtx()
	err := b.Store.MarkOutboxPublishedBatch(ctx, b.carry.unmarked, b.Clock().UnixMilli())
	cancel()
	if err != nil {
		b.Logger.Warn("outbox mark published failed again; retrying next poll", slog.String("worker", WorkerName),
			slog.Int("events", len(b.carry.unmarked)), slog.String("error", supervise.ErrorText(err)))
		return false
	}
	b.Logger.Info("outbox events marked published after the store came back", slog.String("worker", WorkerName),
		slog.Int("events", len(b.carry.unmarked)))
	// Their sends were not counted when the first mark failed: a row is
	// counted by the mark that lands, once.
	if b.Metrics != nil {
		b.Metrics.Success.Add(float64(len(b.carry.unmarked)))
	}
	b.carry.unmarked = nil
	return true
}

type batch struct {
	Deps
	ctx   context.Context
	res   Result
	carry *carry
	// unstarted holds claimed rows not yet attempted; released if the
	// batch ends early (stop or panic).
	unstarted []persistence.OutboxRow
	// from is where the claim's walk of due rows starts (a claim sent
	// while the one before it settles starts where that one stopped: its
	// rooms are still held, and walking their rows again finds nothing);
	// reached is where this claim stopped.
	from, reached persistence.OutboxScanMark
}

// start claims rows and hands them to the publisher room by room; the
// rooms queued with an Enqueuer are returned for settleRooms. A panic
// releases the rows not yet attempted and settles what was queued (those
// events are in the publisher's hands and get their marks) before it goes
// on.
func (b *batch) start() (rooms []*roomTurn, err error) {
	defer func() {
		if r := recover(); r != nil {
			b.release(b.unstarted)
			b.settleRooms(rooms)
			supervise.Repanic(r)
		}
	}()
	cfg := b.Config
	if b.ctx.Err() != nil {
		return nil, nil
	}
	now := b.Clock()
	cctx, cancel := context.WithTimeout(b.ctx, storeTimeout)
	var rows []persistence.OutboxRow
	if r, ok := b.Store.(persistence.OutboxClaimResumer); ok {
		rows, b.reached, err = r.ClaimPendingOutboxFrom(cctx, b.Owner, now.UnixMilli(), cfg.LeaseTTL.Milliseconds(), b.res.Limit, b.from)
	} else {
		rows, err = b.Store.ClaimPendingOutbox(cctx, b.Owner, now.UnixMilli(), cfg.LeaseTTL.Milliseconds(), b.res.Limit)
	}
	cancel()
	if err != nil {
		if b.ctx.Err() != nil {
			return nil, nil
		}
		b.Logger.Error("outbox claim failed", slog.String("worker", WorkerName),
			slog.String("error", supervise.ErrorText(err)))
		return nil, fmt.Errorf("relay: claim pending outbox: %w", err)
	}
	b.res.Claimed = len(rows)
	b.unstarted = rows
	for len(b.unstarted) > 0 {
		if b.ctx.Err() != nil {
			b.res.Unattempted += len(b.unstarted)
			b.release(b.unstarted)
			b.unstarted = nil
			return rooms, nil
		}
		n := 1
		for n < len(b.unstarted) && sameRoom(b.unstarted[n].Envelope, b.unstarted[0].Envelope) {
			n++
		}
		b.res.HotRoomRows = max(b.res.HotRoomRows, n)
		turn := &roomTurn{rows: b.unstarted[:n]}
		b.unstarted = b.unstarted[n:]
		if b.startRoom(turn) {
			rooms = append(rooms, turn)
		}
	}
	return rooms, nil
}

func sameRoom(a, b persistence.Envelope) bool { return a.AppCode == b.AppCode && a.RoomID == b.RoomID }

// inflight is a queued publish waiting for its result.
type inflight struct {
	row    persistence.OutboxRow
	at     int // the row's place in its roomTurn's rows
	done   <-chan error
	cancel context.CancelFunc
	start  time.Time
}

// roomTurn is one room's rows of a claim, in room_seq order.
type roomTurn struct {
	rows   []persistence.OutboxRow
	queued []*inflight
	// rest are rows after a failure, not yet handed to the publisher.
	rest []persistence.OutboxRow
	// settled[i]: rows[i] is no longer this claim's to send: published
	// (a no-op marked, or a send reported) or parked, each recorded in
	// the store. A run of settled rows is marked by its bounds.
	settled []bool
}

// rowLog is the logger of one row's lines, built only for a line that is
// written: building it for every row (most of which log nothing) cost
// the relay as much CPU as the publish itself.
func (b *batch) rowLog(env persistence.Envelope) *slog.Logger {
	return supervise.EventLogger(b.Logger, WorkerName, env)
}

// startRoom publishes a room's rows in order. With an Enqueuer it queues
// them and returns true (settleRooms waits for them); otherwise it sends
// them one by one and stops at the first failure, releasing the rest.
func (b *batch) startRoom(t *roomTurn) bool {
	q, async := b.Publisher.(delivery.Enqueuer)
	t.settled = make([]bool, len(t.rows))
	for i, row := range t.rows {
		env := row.Envelope
		if err := checkEnvelope(env); err != nil {
			// Parking releases the room for its later events (the one
			// exception to room order, documented in client-protocol.md).
			t.settled[i] = b.fail(row, err)
			continue
		}
		// What the event's row says it causes at Tencent goes to the
		// publisher: RoomCreated is not a message but the IM group's
		// idempotent creation (seed 003: the outbox compensates a failed
		// create in the command path).
		if !room.CausesAny(env.EventType, room.AtTencent) {
			// Seed 000: RoomHeatChanged, RoomRankChanged are a no-op
			// success; they never reach IM, so order does not concern them.
			if b.markPublished(row) {
				b.res.NoOp++
				t.settled[i] = true
			}
			continue
		}
		if b.ctx.Err() != nil {
			t.rest = t.rows[i:]
			break
		}
		// The publish may finish after a stop request (the seed lets the
		// in-flight event complete), so it only inherits ctx's values.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.Config.PublishTimeout)
		start := time.Now()
		if async {
			t.queued = append(t.queued, &inflight{row: row, at: i, done: q.Enqueue(pctx, env), cancel: cancel, start: start})
			continue
		}
		err := b.Publisher.PublishRoomEvent(pctx, env)
		cancel()
		b.observe(start)
		if err != nil {
			b.fail(row, err)
			if !parkable(err) {
				t.rest = t.rows[i+1:]
				break
			}
			continue
		}
		if b.markPublished(row) {
			b.res.Published++
		}
	}
	if !async {
		b.giveBack(t)
	}
	return async
}

// giveBack releases the rows a room's failure (or a stop) left unsent.
func (b *batch) giveBack(t *roomTurn) {
	if len(t.rest) > 0 {
		b.res.Unattempted += len(t.rest)
		b.release(t.rest)
		t.rest = nil
	}
}

// settleRooms waits for every queued publish. In each room the results are
// read in order; after the room's first failure the later rows are given
// back whatever the publisher answered for them (an Enqueuer fails them
// unsent), except that a reported success is still recorded. The
// successes of all rooms are marked published in one store write: with a
// commit per row, marking would cap the relay at the store's commit rate.
// A store that marks runs (persistence.OutboxRunMarker) is given each
// room's runs of settled rows instead of their ids when there are at
// least runMarkMin of them.
func (b *batch) settleRooms(rooms []*roomTurn) {
	var (
		ok   []*inflight
		runs []persistence.OutboxRun
	)
	for _, t := range rooms {
		failed := false
		sent := make(map[int]bool, len(t.queued))
		for _, f := range t.queued {
			err := <-f.done
			f.cancel()
			b.observe(f.start)
			switch {
			case err == nil:
				ok = append(ok, f)
				sent[f.at] = true
				t.settled[f.at] = true
			case failed:
				t.rest = append(t.rest, f.row)
			default:
				t.settled[f.at] = b.fail(f.row, err)
				failed = !parkable(err)
			}
		}
		t.queued = nil
		b.giveBack(t)
		runs = append(runs, sentRuns(t, sent)...)
	}
	if len(ok) == 0 {
		return
	}
	ctx, cancel := b.storeCtx()
	var err error
	if m, byRun := b.Store.(persistence.OutboxRunMarker); byRun && len(ok) >= runMarkMin {
		err = m.MarkOutboxPublishedRuns(ctx, runs, b.Clock().UnixMilli())
	} else {
		ids := make([]string, len(ok))
		for i, f := range ok {
			ids[i] = f.row.Envelope.EventID
		}
		err = b.Store.MarkOutboxPublishedBatch(ctx, ids, b.Clock().UnixMilli())
	}
	cancel()
	for _, f := range ok {
		if err != nil {
			b.markFailedToStore(f.row, err)
			continue
		}
		b.logPublished(f.row)
		b.res.Published++
	}
}

// runMarkMin is the fewest sent rows a settle marks by runs. Marking by
// runs pays off on a backlog's claims (hundreds of rows: the ids' IN list
// cost MariaDB more than the rows' updates there); a few rows given back
// by a live room's publisher go by id, which on MariaDB rides the group
// commit's shared transaction with the rooms' appends instead of a
// commit of its own.
const runMarkMin = 100

// sentRuns are the runs of t's rows to mark published: each stretch of
// consecutive settled rows (sent, marked as no-ops, parked), cut to its
// first and last sent row. A row not settled (failed, given back, or its
// store write lost) ends a stretch, so no run reaches over a row that is
// still pending and unsent.
func sentRuns(t *roomTurn, sent map[int]bool) []persistence.OutboxRun {
	var runs []persistence.OutboxRun
	first, last := -1, -1
	flush := func() {
		if first >= 0 {
			f, l := t.rows[first], t.rows[last]
			runs = append(runs, persistence.OutboxRun{Room: f.Envelope.Key(), FromSeq: f.Envelope.RoomSeq, FromIndex: f.EventIndex,
				ToSeq: l.Envelope.RoomSeq, ToIndex: l.EventIndex})
		}
		first, last = -1, -1
	}
	for i := range t.rows {
		if !t.settled[i] {
			flush()
			continue
		}
		if sent[i] {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	flush()
	return runs
}

func (b *batch) observe(start time.Time) {
	if b.Metrics != nil {
		b.Metrics.Latency.Observe(float64(time.Since(start).Microseconds()) / 1000)
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

func (b *batch) markPublished(row persistence.OutboxRow) bool {
	ctx, cancel := b.storeCtx()
	defer cancel()
	if err := b.Store.MarkOutboxPublished(ctx, row.Envelope.EventID, b.Clock().UnixMilli()); err != nil {
		b.markFailedToStore(row, err)
		return false
	}
	b.logPublished(row)
	return true
}

func (b *batch) markFailedToStore(row persistence.OutboxRow, err error) {
	b.res.StoreErrors++
	b.carry.mu.Lock()
	b.carry.unmarked = append(b.carry.unmarked, row.Envelope.EventID)
	if n := len(b.carry.unmarked) - maxUnmarked; n > 0 {
		b.carry.unmarked = b.carry.unmarked[n:]
	}
	b.carry.mu.Unlock()
	b.rowLog(row.Envelope).Error("outbox mark published failed: marked again before the next claim (or published again after its lease)",
		slog.Int("retry_count", row.RetryCount), slog.String("status", persistence.OutboxPending),
		slog.String("error", supervise.ErrorText(err)))
}

func (b *batch) logPublished(row persistence.OutboxRow) {
	if b.Metrics != nil {
		b.Metrics.Success.Inc()
	}
	// A compensation after failures is news; a first-try success is not.
	level := slog.LevelDebug
	if row.RetryCount > 0 {
		level = slog.LevelInfo
	}
	if !b.Logger.Enabled(context.Background(), level) {
		return
	}
	b.rowLog(row.Envelope).Log(context.Background(), level, "outbox event published",
		slog.Int("retry_count", row.RetryCount), slog.String("status", persistence.OutboxPublished),
		slog.String("error", ""))
}

// fail records a failed attempt: a row that can never succeed as it is
// is parked; any other failure keeps it pending with retry_count+1, due
// again per the retry strategy, retried forever (seed: never dropped).
// It reports whether the row is now parked in the store.
func (b *batch) fail(row persistence.OutboxRow, cause error) (parked bool) {
	log := b.rowLog(row.Envelope)
	text := supervise.ErrorText(cause)
	park := parkable(cause)
	if b.Metrics != nil {
		b.Metrics.Failure.Inc()
		if park {
			b.Metrics.Parked.Inc()
		}
	}
	ctx, cancel := b.storeCtx()
	defer cancel()
	now := b.Clock()
	retry := row.RetryCount + 1
	var err error
	if park {
		err = b.Store.ParkOutbox(ctx, row.Envelope.EventID, text, now.UnixMilli())
	} else {
		err = b.Store.MarkOutboxFailed(ctx, row.Envelope.EventID, text, now.UnixMilli(), nextRetry(b.Config, row, now).UnixMilli())
	}
	if err != nil {
		b.res.StoreErrors++
		retry = row.RetryCount
		log.Error("outbox mark failed failed: the row will be retried after its lease",
			slog.String("store_error", supervise.ErrorText(err)))
		return false
	}
	if park {
		b.res.Parked++
		log.Error("outbox event parked: it can never be published as it is; requeue or skip it with roomctl outbox",
			slog.Int("retry_count", retry), slog.String("status", persistence.OutboxParked), slog.String("error", text))
		return true
	}
	b.res.Failed++
	log.Warn("outbox publish failed: its room waits for its retry",
		slog.Int("retry_count", retry), slog.String("status", persistence.OutboxPending), slog.String("error", text))
	return false
}

func (b *batch) release(rows []persistence.OutboxRow) {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.Envelope.EventID
	}
	b.releaseIDs(ids)
}

// releaseIDs gives leases back early, in one store write. Failing here
// costs only a delay (the leases expire by themselves), so errors are
// logged, not returned.
func (b *batch) releaseIDs(ids []string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := b.storeCtx()
	err := b.Store.ReleaseOutboxBatch(ctx, ids)
	cancel()
	if err != nil {
		b.Logger.Warn("outbox release failed: the rows wait for their leases to expire",
			slog.String("worker", WorkerName), slog.String("event_id", ids[0]), slog.Int("rows", len(ids)), slog.String("error", supervise.ErrorText(err)))
	}
}

func (b *batch) refreshGauges() {
	if b.Metrics == nil || time.Since(b.carry.lastGauge) < gaugeEvery {
		return
	}
	b.carry.lastGauge = time.Now()
	ctx, cancel := b.storeCtx()
	defer cancel()
	st, err := b.Store.OutboxStats(ctx)
	if err != nil {
		b.Logger.Warn("outbox stats failed", slog.String("worker", WorkerName),
			slog.String("error", supervise.ErrorText(err)))
		return
	}
	b.Metrics.Pending.Set(float64(st.Pending))
	b.Metrics.ParkedRows.Set(float64(st.Parked))
	age := 0.0
	if st.OldestCreatedAtMs > 0 {
		age = float64(max(0, b.Clock().UnixMilli()-st.OldestCreatedAtMs))
	}
	b.Metrics.OldestPendingAge.Set(age)
}
