package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/persistence"
)

// markAudit is a store that checks every mark against what IM accepted and
// counts the writes. failMarks makes every batched mark fail without
// writing, as a process that died between the send and the mark.
type markAudit struct {
	Store
	pub       *orderPublisher
	failMarks atomic.Bool

	mu          sync.Mutex
	early       []string // marked before IM accepted them
	single      int      // MarkOutboxPublished calls
	batches     int      // MarkOutboxPublishedBatch calls that wrote
	batchedIDs  int
	releases    int // ReleaseOutboxBatch calls with rows
	releasedIDs int
}

func (s *markAudit) check(ids []string) {
	s.pub.mu.Lock()
	defer s.pub.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(s.pub.delivered, id) {
			s.early = append(s.early, id)
		}
	}
}

func (s *markAudit) MarkOutboxPublished(ctx context.Context, id string, nowMs int64) error {
	s.check([]string{id})
	s.mu.Lock()
	s.single++
	s.mu.Unlock()
	return s.Store.MarkOutboxPublished(ctx, id, nowMs)
}

func (s *markAudit) MarkOutboxPublishedBatch(ctx context.Context, ids []string, nowMs int64) error {
	if s.failMarks.Load() {
		return errors.New("process died before the mark")
	}
	s.check(ids)
	s.mu.Lock()
	s.batches++
	s.batchedIDs += len(ids)
	s.mu.Unlock()
	return s.Store.MarkOutboxPublishedBatch(ctx, ids, nowMs)
}

func (s *markAudit) ReleaseOutboxBatch(ctx context.Context, ids []string) error {
	if len(ids) > 0 {
		s.mu.Lock()
		s.releases++
		s.releasedIDs += len(ids)
		s.mu.Unlock()
	}
	return s.Store.ReleaseOutboxBatch(ctx, ids)
}

// auditedRoom starts room app/r1 with its owner, publishing through pub
// (which delivers to im) and storing through a markAudit checked against
// im; set adjusts the node's deps before the room starts.
func auditedRoom(t *testing.T, pub delivery.Publisher, im *orderPublisher, set ...func(*Deps)) (*fixture, *actor.PID, *markAudit) {
	t.Helper()
	f := newFixture(t)
	audit := &markAudit{Store: f.store, pub: im}
	f.deps.Publisher = pub
	f.deps.Store = audit
	for _, fn := range set {
		fn(&f.deps)
	}
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	return f, pid, audit
}

// failOneIn fails about one event in n of room r1 on its first attempt.
// Room seqs are known only after the commands, so the draw is made on
// the event ids up front.
func (p *orderPublisher) failOneIn(n int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	p.mu.Lock()
	defer p.mu.Unlock()
	for seq := 2; seq < 2000; seq++ {
		if rng.IntN(n) == 0 {
			p.failOnce[room.EventID("app", "r1", int64(seq), 0)] = true
		}
	}
}

// writerStorm has writers users join and leave room r1 concurrently,
// rounds commands each, and fails the test on any command error.
func writerStorm(t *testing.T, f *fixture, pid *actor.PID, writers, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", w)
			for k := range rounds {
				rc := rcJoin(fmt.Sprintf("w%d-%d", w, k), user)
				if k%2 == 1 {
					rc = rcLeave(fmt.Sprintf("w%d-%d", w, k), user)
				}
				res, err := f.sys.Root.RequestFuture(pid, rc, 5*time.Second).Result()
				if err == nil {
					_, err = replyOf(res)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", user, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// settle ends a storm: IM stops failing, and one more command's catch-up
// takes the rows that failures (and overflow) left for the relay (none
// runs here). It waits until IM has every event of the room, first
// deliveries in room order, and no row is pending, and fails if a mark
// ran ahead of IM. It returns the room's event ids.
func settle(t *testing.T, f *fixture, pid *actor.PID, pub *orderPublisher, audit *markAudit) []string {
	t.Helper()
	pub.mu.Lock()
	clear(pub.failOnce)
	pub.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	f.mustDo(pid, rcJoin("last", "zed"))
	want, _ := roomEventIDs(t, f)
	pub.waitDelivered(t, want)
	waitFor(t, func() bool { _, p := roomEventIDs(t, f); return p == 0 })
	audit.mu.Lock()
	defer audit.mu.Unlock()
	if len(audit.early) > 0 {
		t.Fatalf("%d rows marked published before IM accepted them: %v", len(audit.early), audit.early)
	}
	return want
}

// roomEventIDs lists the room's outbox event ids in (room_seq, index)
// order, and how many are still pending.
func roomEventIDs(t *testing.T, f *fixture) (ids []string, pending int) {
	t.Helper()
	rows, err := f.store.ListOutbox(context.Background(), persistence.OutboxFilter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rows, func(a, b persistence.OutboxRow) int {
		if a.Envelope.RoomSeq != b.Envelope.RoomSeq {
			return int(a.Envelope.RoomSeq - b.Envelope.RoomSeq)
		}
		return cmpStr(a.Envelope.EventID, b.Envelope.EventID)
	})
	for _, r := range rows {
		ids = append(ids, r.Envelope.EventID)
		if r.Status == persistence.OutboxPending {
			pending++
		}
	}
	return ids, pending
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Marks are batched and never run ahead of IM: 8 writers join and leave
// one room concurrently while IM fails one event in 7 on its first try.
// Every mark the store sees is of an event IM had already accepted; the
// publisher writes marks in batches (no single-row marks, fewer writes
// than events); IM got every event once at least, first deliveries in
// room order; nothing stays pending.
func TestPublisherBatchesMarksBehindIMUnderFailures(t *testing.T) {
	pub := newOrderPublisher()
	f, pid, audit := auditedRoom(t, pub, pub)
	pub.failOneIn(7, 1)

	writerStorm(t, f, pid, 8, 40)
	want := settle(t, f, pid, pub, audit)
	audit.mu.Lock()
	defer audit.mu.Unlock()
	if audit.single != 0 {
		t.Fatalf("%d single-row marks: want every mark batched", audit.single)
	}
	if audit.batches >= audit.batchedIDs {
		t.Fatalf("%d mark writes for %d rows: want fewer writes than rows", audit.batches, audit.batchedIDs)
	}
	t.Logf("%d events, %d marked in %d writes", len(want), audit.batchedIDs, audit.batches)
}

// A publisher that dies between the send and its batched mark (here: the
// mark write never lands, then the grain and its publisher are stopped)
// loses nothing: the rows stay pending under the publisher's lease, no
// other sender takes them before it ends, and after it a relay claims
// every one of them, in room order.
func TestPublisherCrashBeforeBatchedMarkLeavesRowsToTheRelay(t *testing.T) {
	f := newFixture(t)
	pub := newOrderPublisher()
	audit := &markAudit{Store: f.store, pub: pub}
	audit.failMarks.Store(true)
	f.deps.Publisher = pub
	f.deps.Store = audit
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	for i := range 20 {
		f.mustDo(pid, rcJoin(fmt.Sprintf("c%d", i+2), fmt.Sprintf("u%d", i)))
	}
	want, _ := roomEventIDs(t, f)
	pub.waitDelivered(t, want) // IM has them all
	if err := f.sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	now := time.Now()
	early, err := f.store.ClaimPendingOutbox(ctx, "relay-1", now.UnixMilli(), 30_000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(early) != 0 {
		t.Fatalf("a relay claimed %d rows under the publisher's lease", len(early))
	}
	after := now.Add(leaseTTL(&f.deps) + time.Second)
	rows, err := f.store.ClaimPendingOutbox(ctx, "relay-1", after.UnixMilli(), 30_000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Envelope.EventID)
	}
	// Every mark failed, so every row, RoomCreated included, is the
	// relay's.
	if !slices.Equal(got, want) {
		t.Fatalf("relay claimed %v, want every row of the room in order %v", got, want)
	}
	if err := f.store.MarkOutboxPublishedBatch(ctx, got, after.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, pending := roomEventIDs(t, f); pending != 0 {
		t.Fatalf("%d rows still pending after the relay's round", pending)
	}
}

// queuePublisher is an Enqueuer over orderPublisher with roomim's
// contract: one sender drains the queue in order; after a failure, the
// events queued behind it fail unsent, and later events fail until one at
// or below the failed seq is queued again (a sender starting over).
type queuePublisher struct {
	*orderPublisher
	mu       sync.Mutex
	pending  []queued
	blocked  int64 // 0: none
	wake     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	maxQueue int // the most events queued at once, to see catch-ups pipeline
}

type queued struct {
	ctx  context.Context
	env  persistence.Envelope
	done chan error
}

var errHeld = errors.New("held back behind an earlier failed event")

func newQueuePublisher(t *testing.T) *queuePublisher {
	p := &queuePublisher{orderPublisher: newOrderPublisher(), wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.drain()
	t.Cleanup(func() { close(p.stop); <-p.stopped })
	return p
}

func (p *queuePublisher) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	done := make(chan error, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked > 0 {
		if env.RoomSeq > p.blocked {
			done <- errHeld
			return done
		}
		p.blocked = 0
	}
	p.pending = append(p.pending, queued{ctx, env, done})
	p.maxQueue = max(p.maxQueue, len(p.pending))
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return done
}

func (p *queuePublisher) drain() {
	defer close(p.stopped)
	for {
		p.mu.Lock()
		if len(p.pending) == 0 {
			p.mu.Unlock()
			select {
			case <-p.wake:
				continue
			case <-p.stop:
				return
			}
		}
		it := p.pending[0]
		p.pending = p.pending[1:]
		p.mu.Unlock()
		err := it.ctx.Err()
		if err == nil {
			err = p.PublishRoomEvent(it.ctx, it.env)
		}
		it.done <- err
		if err != nil {
			p.mu.Lock()
			for _, q := range p.pending {
				q.done <- errHeld
			}
			p.pending = nil
			p.blocked = it.env.RoomSeq
			p.mu.Unlock()
		}
	}
}

// The same storm through an Enqueuer (the production shape: catch-ups
// queue their rows at once): 8 concurrent writers, IM failing 1 event in 7
// on its first try, a publish backlog of 16 so rows also overflow to the
// "relay" and come back through catch-ups. First deliveries are exactly
// the room's events in room order, every row ends published, no mark ran
// ahead of IM, and catch-ups did queue many rows at once.
func TestPublisherCatchUpsPipelineInOrderUnderFailures(t *testing.T) {
	pub := newQueuePublisher(t)
	f, pid, audit := auditedRoom(t, pub, pub.orderPublisher, func(d *Deps) { d.MaxPublishBacklog = 16 })
	pub.failOneIn(7, 3)

	writerStorm(t, f, pid, 8, 60)
	want := settle(t, f, pid, pub.orderPublisher, audit)
	pub.mu.Lock()
	defer pub.mu.Unlock()
	// In-order sends in flight stay within the backlog (16), and a
	// catch-up starts only once they have settled (or it would claim them
	// again): a queue longer than the backlog is a catch-up that queued its
	// rows at once.
	if pub.maxQueue <= 16 {
		t.Fatalf("at most %d events queued at once: catch-ups did not pipeline", pub.maxQueue)
	}
	t.Logf("%d events; at most %d queued at once", len(want), pub.maxQueue)
}

// Rows a publisher gives back unsent are released in batches: through an
// Enqueuer, a failed event fails every event queued behind it, and the
// room's publisher gives them all back in one store write instead of one
// each (an IM outage cost a MariaDB commit per event). 8 writers, IM
// failing 1 event in 5 on its first try: fewer release writes than
// released rows, and the storm still ends with first deliveries in room
// order, every row published and no mark ahead of IM.
func TestPublisherReleasesUnsentRowsInBatches(t *testing.T) {
	pub := newQueuePublisher(t)
	f, pid, audit := auditedRoom(t, pub, pub.orderPublisher)
	pub.failOneIn(5, 9)

	writerStorm(t, f, pid, 8, 60)
	want := settle(t, f, pid, pub.orderPublisher, audit)
	if got := pub.firsts(); !slices.Equal(got, want) {
		t.Fatalf("first deliveries are not the room's events in order:\n got %v\nwant %v", got, want)
	}
	audit.mu.Lock()
	defer audit.mu.Unlock()
	if audit.releasedIDs == 0 {
		t.Fatal("no row was released: the storm did not fail any send")
	}
	if audit.releases >= audit.releasedIDs {
		t.Fatalf("%d release writes for %d rows: want fewer writes than rows", audit.releases, audit.releasedIDs)
	}
	t.Logf("%d events; %d rows released in %d writes", len(want), audit.releasedIDs, audit.releases)
}
