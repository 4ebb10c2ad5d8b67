package roomgrain

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/room"

	"github.com/hyapp/roomcell/actors/outboxmarks"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/persistence"
)

// publishEvents is a batch the grain hands to its publisher.
type publishEvents struct {
	envs []persistence.Envelope
	// untilMs is the end of the lease the rows were written with (0: they
	// were written without one).
	untilMs int64
}

// ids are the batch's event ids.
func (m *publishEvents) ids() []string {
	ids := make([]string, len(m.envs))
	for i, e := range m.envs {
		ids[i] = e.EventID
	}
	return ids
}

// maxCatchUp bounds the rows one catch-up claims: a hot room's backlog
// (the rows that overflowed to the relay meanwhile) in one claim, queued
// at once (sendRows); at ~100 events per IM message it is about ten
// messages, far inside the rows' lease.
const maxCatchUp = 1000

// errNotSent: a catch-up row after a failed one, never handed to IM.
var errNotSent = errors.New("not sent: an earlier event of the room failed")

// pubLink is what a grain shares with its publisher.
type pubLink struct {
	// run is the publisher's queue: its work runs there in order, off the
	// grain's mailbox (serial.go).
	run     Serial
	pub     publisher // one allocation with its link
	marks   *outboxmarks.Batcher
	owner   string // lease owner: this activation's publisher
	backlog atomic.Int64
	// order says whether new rows may be sent as they come (see
	// orderState).
	order orderState
	// handed is the highest room_seq the grain handed to the publisher. A
	// command whose seq does not follow it means rows the publisher never
	// saw (an append whose outcome was unknown but committed, rows left to
	// the relay): in-order sending must stop until a catch-up.
	handed atomic.Int64
	// overflow rate-limits the "backlog full" line (grain goroutine only).
	overflow overflowLog
	// inflight counts in-order sends handed to the Enqueuer whose result
	// has not been settled. It rises on the publisher's queue only, so a
	// catch-up (also on the queue) can wait for it to reach 0. (A counter,
	// not a WaitGroup: the link must stay in its size class.)
	inflight atomic.Int32
}

// overflowLogEvery is the least time between two "backlog full" lines of
// a room: a hot room overflows on most commands, and a line each buried
// the log (5,000 lines/s). The metric counts every event.
const overflowLogEvery = 10 * time.Second

// overflowLog holds back a room's "backlog full" lines between two
// written ones and counts the events they would have reported.
type overflowLog struct {
	lastNs int64 // Unix ns of the last line (a time.Time would take pubLink past its size class)
	held   int   // events left to the relay since the last line
}

// note records n events left to the relay at now and reports whether a
// line is due, with the events it reports (these and the held ones).
func (o *overflowLog) note(now time.Time, n int) (events int, write bool) {
	o.held += n
	if o.lastNs != 0 && now.UnixNano()-o.lastNs < int64(overflowLogEvery) {
		return 0, false
	}
	events, o.held, o.lastNs = o.held, 0, now.UnixNano()
	return events, true
}

// orderState is true while every pending row of the room is either
// published or in the publisher's hands: then new rows may be sent as they
// come. Otherwise (at activation, after a failure, after rows were left to
// the relay) the publisher first catches up through ClaimRoomOutbox, which
// returns the room's pending rows in order or nothing when a relay holds
// the room.
//
// The grain and the publisher's send results break the order while a
// catch-up may be running; a catch-up re-enters in-order mode only if
// nothing broke it since it began. A plain flag let a catch-up that
// claimed before a break overwrite it: the publisher then sent a later row
// while an earlier one it never saw (left to the relay, or written by an
// append whose outcome was unknown) was still pending.
type orderState struct {
	mu      sync.Mutex
	inOrder bool
	// stopped: the grain stopped; what is still queued gives its rows
	// back instead of sending them.
	stopped bool
	breaks  uint64
	// unsent are rows whose send failed, to be given back to the relay in
	// one store write (failUnsent, takeUnsent).
	unsent []string
}

func (o *orderState) ordered() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.inOrder
}

// breakOrder sends the next rows through a catch-up.
func (o *orderState) breakOrder() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.breakLocked()
}

func (o *orderState) breakLocked() {
	o.inOrder = false
	o.breaks++
}

// failUnsent breaks the order for a failed send of row id and queues the
// row to be released. first is true when no release was queued: the
// caller then queues one (takeUnsent) on the publisher's queue. The rows
// of one failed IM message fail together; one write gives them all back
// instead of a commit each.
func (o *orderState) failUnsent(id string) (first bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.breakLocked()
	o.unsent = append(o.unsent, id)
	return len(o.unsent) == 1
}

// takeUnsent returns the queued failed rows and empties the queue.
func (o *orderState) takeUnsent() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := o.unsent
	o.unsent = nil
	return ids
}

// begin is taken before a catch-up's claim.
func (o *orderState) begin() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.breaks
}

// resume re-enters in-order mode unless the order broke after begin
// returned mark.
func (o *orderState) resume(mark uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.breaks != mark {
		return false
	}
	o.inOrder = true
	return true
}

// stop makes the queued work give its rows back (stopPublisher).
func (o *orderState) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	o.breakLocked()
}

// stopping reports whether the grain stopped.
func (o *orderState) stopping() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stopped
}

// start marks a new room: it has no rows before its first command's.
func (o *orderState) start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inOrder = true
}

// publisher publishes a room grain's events in order, on its own queue
// (pubLink.run), so IM latency never sits on the command path. It is the
// room's one sender while it holds the room's rows: the grain writes them
// leased to it (Append's Lease), so no relay takes them meanwhile. Success
// marks a row published; failure gives the room back to the relay (the
// row stays pending with retry_count untouched: the relay owns retries
// and their schedule).
type publisher struct {
	deps    *Deps
	key     persistence.RoomKey
	link    *pubLink
	log     *slog.Logger
	lastSeq int64 // highest room_seq this publisher has sent
}

func newOwner() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "room-publisher/" + hex.EncodeToString(b[:])
}

// startPublisher makes the grain's publisher.
func (g *grain) startPublisher() {
	link := &pubLink{owner: newOwner(), marks: g.deps.Marks}
	if link.marks == nil {
		link.marks = outboxmarks.New(g.deps.Store, g.deps.Clock, g.deps.Config.StoreTimeout, g.deps.Logger, OutboxWorker)
	}
	link.pub = publisher{deps: g.deps, key: g.key(), link: link, log: g.log}
	log := g.log
	link.run.Panicked = func(p any, stack []byte) {
		// What the item was doing is unknown: the next events go through
		// a catch-up, which reads the pending rows from the store.
		link.order.breakOrder()
		log.Error("room publisher panicked; its next events catch up from the outbox", "panic", fmt.Sprint(p), "stack", string(stack))
	}
	g.pub = link
}

// stopPublisher makes the publisher's queued work give its rows back to
// the relay, in the queue's order, instead of sending them: a grain
// stopped because its shard went to another node (a restarted node taking
// its shards back) or passivated leaves no row leased to a publisher that
// will never send it, so the room's next owner (its catch-up) or the
// relay sends them at once rather than after their lease; a send already
// under way finishes and is marked or given back as before.
func (g *grain) stopPublisher() {
	if g.pub != nil {
		g.pub.order.stop()
	}
}

// leaseTTL is how long rows written for the publisher stay its own: a
// publish and a mark (sends are queued at once and coalesce; a send never
// runs past the lease minus a second, deadline). A crashed node's rows
// reach the relay after it, so it is what a row written just before a
// SIGKILL waits: at 10 s (the former floor) such rows reached IM up to
// 10.8 s after the failover.
func leaseTTL(d *Deps) time.Duration {
	return max(5*time.Second, d.Config.PublishTimeout+d.Config.StoreTimeout)
}

// publishLease is the Append lease for the events of the command at seq:
// the rows go to the room's publisher unless its backlog is full (then
// they are the relay's from the start, and the publisher must catch up
// before it sends again).
func (g *grain) publishLease(seq int64) *persistence.OutboxLease {
	if g.deps.Publisher == nil || g.pub == nil {
		return nil
	}
	switch {
	case seq == 1:
		// A new room has no outbox rows: nothing can be before these.
		g.pub.order.start()
	case seq != g.pub.handed.Load()+1:
		g.pub.order.breakOrder()
	}
	if g.pub.backlog.Load() >= g.deps.MaxPublishBacklog {
		g.pub.order.breakOrder()
		return nil
	}
	return &persistence.OutboxLease{Owner: g.pub.owner, UntilMs: g.deps.Clock().Add(leaseTTL(g.deps)).UnixMilli()}
}

// startGroup begins CreateRoom's group step (seed 003: the IM group is
// created on CreateRoom's path, its RoomCreated outbox row only
// compensates) beside the command's append, so the reply waits for the
// slower of the two instead of their sum; publish waits for it before the
// reply, so the group exists before the client is told the room does and
// before anything is sent to it. nil when there is no step: no IM, the
// rows left to the relay, or not a new room's RoomCreated. A new room has
// nothing pending before it, so its RoomCreated may go first.
func (g *grain) startGroup(cmd room.Command, envs []persistence.Envelope, lease *persistence.OutboxLease) <-chan groupStep {
	if g.deps.Publisher == nil || lease == nil || cmd.Type != room.CmdCreateRoom || len(envs) == 0 ||
		envs[0].EventType != room.TypeRoomCreated || !g.pub.order.ordered() {
		return nil
	}
	done := make(chan groupStep, 1)
	pub, env, timeout := g.deps.Publisher, envs[0], g.deps.createGroupTimeout()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		err := pub.PublishRoomEvent(ctx, env)
		done <- groupStep{err: err, took: time.Since(start)}
	}()
	return done
}

// groupStep is the outcome of CreateRoom's group step and how long it took.
type groupStep struct {
	err  error
	took time.Duration
}

// GroupDropper is a Publisher that can take back a group made for a
// CreateRoom whose append failed.
type GroupDropper interface {
	DropGroup(ctx context.Context, appCode, roomID string) error
}

// groupAbandoned settles CreateRoom's group step when the append failed.
// A conflict means the room exists (this command stored before, or
// another owner's CreateRoom): its group is wanted, and stays. Any other
// failure leaves the room unstored as far as anyone knows: the group made
// beside it is destroyed (after its create, in the mailbox, so a retry of
// the command cannot overtake the destroy), and the publisher forgets it.
// If the append did commit after all (its acknowledgement lost), the
// retry the caller was told to make answers from the log and makes the
// group again (groupReady), as does the RoomCreated row.
func (g *grain) groupAbandoned(group <-chan groupStep, err error) {
	if group == nil {
		return
	}
	// Waited for either way: the reply follows the step's end.
	if step := <-group; step.err != nil || errors.Is(err, persistence.ErrConflict) {
		return
	}
	d, ok := g.deps.Publisher.(GroupDropper)
	if !ok {
		return
	}
	k := g.key()
	ctx, cancel := context.WithTimeout(context.Background(), g.deps.createGroupTimeout())
	defer cancel()
	if derr := d.DropGroup(ctx, k.AppCode, k.RoomID); derr != nil {
		g.log.Warn("im group made for a CreateRoom that was not stored could not be destroyed", "error", derr)
	}
}

// publish hands the command's events to the room's publisher, off the
// command path, after CreateRoom's group step (startGroup) has answered.
// groupReady reports that the step succeeded; when it did not (IM off,
// down, or slower than create_group_timeout) the RoomCreated row goes on
// with the rest and the publisher, then the relay, retry it.
func (g *grain) publish(envs []persistence.Envelope, lease *persistence.OutboxLease, group <-chan groupStep) (groupReady bool) {
	if g.deps.Publisher == nil || len(envs) == 0 {
		return false
	}
	if lease == nil {
		g.deps.PublishMetrics.overflowed(len(envs))
		if n, ok := g.pub.overflow.note(g.deps.Clock(), len(envs)); ok {
			g.log.Warn("room publish backlog full; events left to the outbox relay (one line per room per 10s)",
				"events", n, "backlog", g.pub.backlog.Load())
		}
		return false
	}
	g.pub.handed.Store(envs[len(envs)-1].RoomSeq)
	if group != nil {
		// A copy: the publisher's own lastSeq must not count this send
		// (the command's other events share its seq).
		p := publisher{deps: g.deps, key: g.key(), link: g.pub, log: g.log}
		// Counted as the row's send only now that the row is stored: a
		// group made for an append that failed (a rival CreateRoom's
		// conflict) is no send of any row.
		step := <-group
		g.deps.PublishMetrics.sent(time.Now().Add(-step.took), step.err)
		if p.settleOne(envs[0], step.err) {
			envs, groupReady = envs[1:], true
		}
	}
	if len(envs) == 0 {
		return groupReady
	}
	g.pub.backlog.Add(int64(len(envs)))
	m, p := &publishEvents{envs: envs, untilMs: lease.UntilMs}, &g.pub.pub
	if !g.pub.run.Post(func() { p.handle(m) }) {
		g.pub.backlog.Add(-int64(len(envs)))
	}
	return groupReady
}

// createGroupTimeout bounds CreateRoom's group step: room.create_group_timeout,
// never above publish_timeout.
func (d *Deps) createGroupTimeout() time.Duration {
	t := d.Config.CreateGroupTimeout
	if t <= 0 {
		t = time.Second
	}
	if d.Config.PublishTimeout > 0 {
		t = min(t, d.Config.PublishTimeout)
	}
	return t
}

// GroupChecker is a Publisher that can say whether a room's IM group is
// known to exist without a call.
type GroupChecker interface {
	GroupKnown(appCode, roomID string) bool
}

// groupReady answers im_group_ready for a repeated CreateRoom: the group
// is known to exist, or creating it again (idempotent) succeeds within
// create_group_timeout. A client that got false retries CreateRoom with
// the same command_id to retry the group step; nothing else is written.
func (g *grain) groupReady(rec persistence.CommandRecord) bool {
	if g.deps.Publisher == nil || len(rec.Events) == 0 || rec.Events[0].EventType != room.TypeRoomCreated {
		return false
	}
	if g.state.Status == room.StatusClosed {
		// Its group was destroyed with it: making it again would leave a
		// closed room's group behind.
		return false
	}
	k := g.key()
	if c, ok := g.deps.Publisher.(GroupChecker); ok && c.GroupKnown(k.AppCode, k.RoomID) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.deps.createGroupTimeout())
	defer cancel()
	return g.deps.Publisher.PublishRoomEvent(ctx, rec.Events[0]) == nil
}

func (p *publisher) handle(m *publishEvents) {
	if p.link.order.stopping() {
		p.link.backlog.Add(-int64(len(m.envs)))
		if m.untilMs > 0 {
			p.release(m.ids())
		}
		return
	}
	if p.link.order.ordered() {
		p.sendInOrder(m)
	} else {
		p.catchUp(m)
	}
}

// deadline is a send's context: publish_timeout, but never past the
// rows' lease minus a margin, so no send of this publisher can still be
// under way when a relay may take the room.
func (p *publisher) deadline(untilMs int64) (context.Context, context.CancelFunc) {
	d := time.Now().Add(p.deps.Config.PublishTimeout)
	if untilMs > 0 {
		if end := time.UnixMilli(untilMs).Add(-time.Second); end.Before(d) {
			d = end
		}
	}
	return context.WithDeadline(context.Background(), d)
}

// sendInOrder queues new rows as they come. Results are read off the
// publisher's queue so the next command's events can join the IM queue
// (and coalesce); a failure switches the publisher to catch-up and gives
// the rows back.
func (p *publisher) sendInOrder(m *publishEvents) {
	q, async := p.deps.Publisher.(delivery.Enqueuer)
	// A command's events share its seq, so only a seq a catch-up sent
	// before this message means "already sent": comparing with lastSeq as
	// it moves would skip every event after a command's first (a seat's
	// RoomMicReleased then RoomUserLeft, RoomCreated then the owner's
	// RoomUserJoined), leaving it leased and unsent while later commands
	// went out.
	sent := p.lastSeq
	for _, env := range m.envs {
		if env.RoomSeq <= sent && env.RoomSeq > 0 {
			// Already sent by a catch-up that claimed it.
			p.link.backlog.Add(-1)
			continue
		}
		p.lastSeq = max(p.lastSeq, env.RoomSeq)
		pctx, cancel := p.deadline(m.untilMs)
		start := time.Now()
		if !async {
			err := p.deps.Publisher.PublishRoomEvent(pctx, env)
			cancel()
			p.settle(env, start, err)
			p.link.backlog.Add(-1)
			continue
		}
		p.link.inflight.Add(1)
		finish := func(err error) {
			cancel()
			p.settle(env, start, err)
			p.link.backlog.Add(-1)
			p.link.inflight.Add(-1)
		}
		if n, ok := q.(delivery.NotifyEnqueuer); ok {
			// The result comes to finish on the IM queue's goroutine:
			// no goroutine per event waiting for it.
			n.EnqueueNotify(pctx, env, finish)
			continue
		}
		done := q.Enqueue(pctx, env)
		go func() { finish(<-done) }()
	}
}

// settle records an outcome from any goroutine: published on success; on
// failure the publisher leaves in-order mode at once (the next events go
// through a catch-up) and the row is given back to the relay from the
// publisher's queue, after any catch-up already queued, so a release never
// clears a lease a catch-up took. Failures arriving before that release
// runs join it (one store write).
func (p *publisher) settle(env persistence.Envelope, start time.Time, err error) {
	p.deps.PublishMetrics.sent(start, err)
	if err != nil {
		first := p.link.order.failUnsent(env.EventID)
		p.failed(env, "sync publish failed; event stays pending for the outbox relay", err)
		if first {
			p.link.run.Post(func() { p.release(p.link.order.takeUnsent()) })
		}
		return
	}
	p.markPublished(env)
}

// eventLog carries seed 000's eight fields like the relay's lines;
// retry_count is 0 (the sync attempt never counts) and path tells the two
// publishers apart. It starts from the node's logger, not the room's:
// the seed's room_id is the room's own field.
func (p *publisher) eventLog(env persistence.Envelope) *slog.Logger {
	return supervise.EventLogger(p.deps.Logger, OutboxWorker, env).With(slog.String("app_code", env.AppCode), slog.String("path", "sync"))
}

func (p *publisher) failed(env persistence.Envelope, msg string, err error) {
	// Under an IM quota every send can fail this way; the redaction's
	// regexps and the logger's fields cost more than the send itself.
	if !p.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	p.eventLog(env).Info(msg, slog.Int("retry_count", 0), slog.String("status", persistence.OutboxPending),
		slog.String("error", supervise.ErrorText(err)))
}

// markPublished queues the row's mark (actors/outboxmarks): one store write for many
// events instead of a commit each. Only called once IM accepted the event.
func (p *publisher) markPublished(env persistence.Envelope) {
	p.link.marks.Add(env, p.link.order.breakOrder)
}

// OutboxWorker is seed 000's `worker` log field, fixed to room_outbox for
// every publish of a room_outbox row, whichever path sends it.
const OutboxWorker = "room_outbox"

// release gives rows back to the relay without counting a failure, in
// one store write.
func (p *publisher) release(ids []string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.deps.Config.StoreTimeout)
	err := p.deps.Store.ReleaseOutboxBatch(ctx, ids)
	cancel()
	if err != nil {
		p.log.Warn("release after a failed publish failed; the rows wait for their lease",
			"event_id", ids[0], "rows", len(ids), "error", err)
	}
}

// catchUp claims the room's pending rows (its own and any earlier ones)
// and sends them in order, waiting for each result. It returns to in-order
// mode only when it got every pending row and all were sent. When a relay
// holds the room or its earliest row waits for a retry, the new rows are
// given back: the relay sends them after the earlier ones.
func (p *publisher) catchUp(m *publishEvents) {
	defer p.link.backlog.Add(-int64(len(m.envs)))
	mark := p.link.order.begin()
	// In-order sends still at IM are pending rows leased to this
	// publisher, which its own claim below would hand back and send a
	// second time: a hot room's first burst overflowed its backlog while
	// its first sends were in flight and sent ~0.4% of its events twice.
	// Wait for their results (each is bounded by its lease), then for
	// their marks and any others still queued.
	for p.link.inflight.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
	p.link.marks.Wait()
	now := p.deps.Clock()
	ttl := leaseTTL(p.deps)
	sctx, cancel := context.WithTimeout(context.Background(), p.deps.Config.StoreTimeout)
	rows, err := p.deps.Store.ClaimRoomOutbox(sctx, p.key, p.link.owner, now.UnixMilli(), ttl.Milliseconds(), maxCatchUp)
	cancel()
	if err != nil || len(rows) == 0 {
		if err != nil {
			p.log.Warn("publisher catch-up claim failed; events left to the outbox relay", "error", err)
		}
		if m.untilMs > 0 {
			p.release(m.ids())
		}
		return
	}
	if !p.sendRows(rows, now.Add(ttl).UnixMilli()) {
		return
	}
	if len(rows) < maxCatchUp {
		p.link.order.resume(mark)
		return
	}
	// More than one catch-up's worth: the rest, these events included, go
	// to the relay now rather than after their lease.
	var rest []string
	for _, e := range m.envs {
		if e.RoomSeq > p.lastSeq {
			rest = append(rest, e.EventID)
		}
	}
	p.release(rest)
}

// sendRows sends a catch-up's rows in order and marks the ones IM
// accepted; false when one failed (it and the rows after it that were not
// sent are given back to the relay). With an Enqueuer the rows are queued
// at once, so they coalesce into a few IM messages instead of one message
// per row (one room gets 40 messages/s: a catch-up of 1,000 rows took 25 s
// when each waited for its own send).
func (p *publisher) sendRows(rows []persistence.OutboxRow, untilMs int64) bool {
	q, async := p.deps.Publisher.(delivery.Enqueuer)
	results := make([]<-chan error, 0, len(rows))
	start := time.Now() // a row's latency counts from the catch-up's start
	for _, row := range rows {
		pctx, cancel := p.deadline(untilMs)
		if async {
			done := q.Enqueue(pctx, row.Envelope)
			results = append(results, done)
			defer cancel()
			continue
		}
		err := p.deps.Publisher.PublishRoomEvent(pctx, row.Envelope)
		cancel()
		ch := make(chan error, 1)
		ch <- err
		results = append(results, ch)
		if err != nil {
			break // the rows after it stay unsent
		}
	}
	var rest []string
	failed := false
	for i, row := range rows {
		env := row.Envelope
		var err error
		if i < len(results) {
			err = <-results[i]
		} else {
			err = errNotSent
		}
		if i < len(results) && (err == nil || !failed) {
			// Rows failed unsent after the first failure were no attempt.
			p.deps.PublishMetrics.sent(start, err)
		}
		switch {
		case err == nil:
			// An Enqueuer fails what follows a failure unsent, so a success
			// after one is only possible if it was sent: record it.
			p.markPublished(env)
			p.lastSeq = max(p.lastSeq, env.RoomSeq)
		case failed:
			rest = append(rest, env.EventID)
		default:
			failed = true
			p.failed(env, "sync publish failed (catch-up); the room's events stay pending for the outbox relay", err)
			rest = append(rest, env.EventID)
		}
	}
	if failed {
		p.release(rest)
	}
	return !failed
}

// settleOne records an event published inline (CreateRoom's group) and
// marks it; false when it failed (the row then goes with the rest).
func (p *publisher) settleOne(env persistence.Envelope, err error) bool {
	if err != nil {
		p.failed(env, "sync publish failed (inline); it goes to the room's publisher", err)
		return false
	}
	p.markPublished(env)
	p.lastSeq = max(p.lastSeq, env.RoomSeq)
	return true
}
