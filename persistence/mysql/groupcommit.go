package mysql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/persistence"
)

// groupCommitter writes the appends of many rooms in shared transactions:
// with innodb_flush_log_at_trx_commit=1 every COMMIT waits for a redo log
// flush, and one statement per table per batch saves round trips too.
// Each of its writers takes what is queued (up to maxBatch) and hands the
// batch to Store.writeBatch, which gives every append its own result. A
// writer lingers for more appends only while another writer's transaction
// is in flight, and only until that transaction ends (or linger passes):
// a lone append on a quiet node is not delayed, and under load the writers
// alternate, one filling while the other commits. Measured in
// docs/benchmarks.md: lingering the full 2ms instead cost a third of the
// throughput at 64 rooms.
//
// The published marks of earlier events (MarkOutboxPublishedBatch) ride
// the same transactions: a mark queued while appends are written goes
// into the next shared transaction instead of a commit of its own, and a
// mark with no append to ride with is written by the next free writer on
// its own, as before.
type groupCommitter struct {
	s        *Store
	maxBatch int
	linger   time.Duration

	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool
	queue  chan *queuedAppend
	wg     sync.WaitGroup
	busy   atomic.Int32 // writers inside a transaction

	markMu sync.Mutex
	marks  []*queuedMark // waiting for the next transaction
	wake   chan struct{} // cap 1: a mark was queued

	finMu    sync.Mutex
	finished chan struct{} // closed (and replaced) each time a writer's transaction ends

	batches, appends atomic.Int64
	// sizes and took observe every batch (live appends; the shared
	// transactions' time), exported by Store.Collectors.
	sizes, took prometheus.Histogram
}

// States of a queued append. The writer and the caller race to move it out
// of queued: whoever wins decides whether it is written.
const (
	stateQueued int32 = iota
	stateTaken
	stateAbandoned
)

// queuedMark is a MarkOutboxPublishedBatch or a ReleaseOutboxBatch
// waiting for a writer.
type queuedMark struct {
	ctx     context.Context
	release bool // ReleaseOutboxBatch (nowMs unused)
	ids     []string
	nowMs   int64
	err     error
	done    chan struct{} // closed after err is set
}

type queuedAppend struct {
	p     *pendingAppend
	ctx   context.Context
	state atomic.Int32
	done  chan struct{} // closed after p.err is set
}

func newGroupCommitter(s *Store, maxBatch int, linger time.Duration, writers int) *groupCommitter {
	g := &groupCommitter{
		s:        s,
		maxBatch: maxBatch,
		linger:   linger,
		queue:    make(chan *queuedAppend, maxBatch*writers),
		finished: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		sizes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roomcell_mysql_group_commit_batch_size",
			Help:    "Room appends written per group-commit batch (MySQL room store; mysql.group_commit.max_batch caps it).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roomcell_mysql_group_commit_seconds",
			Help:    "Time one group-commit batch spent writing its shared transactions (MySQL room store).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
	}
	for range writers {
		g.wg.Add(1)
		go g.run()
	}
	return g
}

// append queues p and waits for its result or for ctx, whichever is first.
func (g *groupCommitter) append(ctx context.Context, p *pendingAppend) error {
	key := p.a.Command.Key()
	q := &queuedAppend{p: p, ctx: ctx, done: make(chan struct{})}
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return errClosed
	}
	select {
	case g.queue <- q:
		g.mu.RUnlock()
	case <-ctx.Done():
		g.mu.RUnlock()
		return fmt.Errorf("mysql: append %s seq %d: not written: %w: %w", key, p.a.Command.Seq, persistence.ErrUnavailable, ctx.Err())
	}
	select {
	case <-q.done:
		return p.err
	case <-ctx.Done():
		if q.state.CompareAndSwap(stateQueued, stateAbandoned) || q.state.Load() == stateAbandoned {
			return fmt.Errorf("mysql: append %s seq %d: not written: %w: %w", key, p.a.Command.Seq, persistence.ErrUnavailable, ctx.Err())
		}
		// Its transaction is in flight: the caller's deadline wins over
		// knowing the outcome, and the grain reloads before its next write.
		return fmt.Errorf("mysql: append %s seq %d: deadline passed during its transaction, outcome unknown: %w: %w",
			key, p.a.Command.Seq, persistence.ErrUnavailable, ctx.Err())
	}
}

func (g *groupCommitter) run() {
	defer g.wg.Done()
	batch := make([]*queuedAppend, 0, g.maxBatch)
	for {
		batch = batch[:0]
		select {
		case q, ok := <-g.queue:
			if !ok {
				// Closed: no mark can be queued any more (close holds mu),
				// and the ones queued before are written now.
				g.flush(nil, g.takeMarks())
				return
			}
			batch = append(batch, q)
		case <-g.wake:
		}
		open := g.collect(&batch)
		g.flush(batch, g.takeMarks())
		if !open {
			g.flush(nil, g.takeMarks())
			return
		}
	}
}

// mark queues q (a published mark or a release) for the next writer and
// waits for its result or for ctx. A mark whose caller gave up may still
// be written: it changes only rows still pending, so a late one is
// harmless (the row was sent; the relay would only have sent it again),
// as is a late release (the row goes to the relay, which sends it).
func (g *groupCommitter) mark(ctx context.Context, q *queuedMark) error {
	q.ctx, q.done = ctx, make(chan struct{})
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return errClosed
	}
	g.markMu.Lock()
	g.marks = append(g.marks, q)
	g.markMu.Unlock()
	g.mu.RUnlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	select {
	case <-q.done:
		return q.err
	case <-ctx.Done():
		return fmt.Errorf("mysql: %s: %w: %w", q.op(), persistence.ErrUnavailable, ctx.Err())
	}
}

// takeMarks empties the mark queue.
func (g *groupCommitter) takeMarks() []*queuedMark {
	g.markMu.Lock()
	defer g.markMu.Unlock()
	ms := g.marks
	g.marks = nil
	return ms
}

// collect adds what is already queued to batch, then lingers for more if
// another writer is busy. It reports false once the queue is closed and
// drained.
func (g *groupCommitter) collect(batch *[]*queuedAppend) bool {
	for len(*batch) < g.maxBatch {
		select {
		case q, ok := <-g.queue:
			if !ok {
				return false
			}
			*batch = append(*batch, q)
			continue
		default:
		}
		break
	}
	// Take the signal before reading busy: a transaction that ends in
	// between has either closed this channel or already left busy.
	g.finMu.Lock()
	finished := g.finished
	g.finMu.Unlock()
	if len(*batch) >= g.maxBatch || g.linger <= 0 || g.busy.Load() == 0 {
		return true
	}
	timer := time.NewTimer(g.linger)
	defer timer.Stop()
	for len(*batch) < g.maxBatch {
		select {
		case q, ok := <-g.queue:
			if !ok {
				return false
			}
			*batch = append(*batch, q)
		case <-finished:
			// The transaction in flight is done and its writer is free to
			// take the next appends: waiting longer only adds latency.
			return true
		case <-timer.C:
			return true
		}
	}
	return true
}

// flush writes the batch's live appends and the queued marks in shared
// transactions and wakes their callers. Appends whose caller gave up are
// dropped unwritten, as are marks.
func (g *groupCommitter) flush(batch []*queuedAppend, marks []*queuedMark) {
	live := batch[:0:0]
	ps := make([]*pendingAppend, 0, len(batch))
	for _, q := range batch {
		if q.ctx.Err() != nil {
			q.state.CompareAndSwap(stateQueued, stateAbandoned)
		}
		if !q.state.CompareAndSwap(stateQueued, stateTaken) {
			continue
		}
		live = append(live, q)
		ps = append(ps, q.p)
	}
	liveMarks := marks[:0:0]
	for _, m := range marks {
		if err := m.ctx.Err(); err != nil {
			m.err = fmt.Errorf("mysql: %s: not written: %w: %w", m.op(), persistence.ErrUnavailable, err)
			close(m.done)
			continue
		}
		liveMarks = append(liveMarks, m)
	}
	if len(ps) == 0 && len(liveMarks) == 0 {
		return
	}
	g.busy.Add(1)
	// Not any caller's context: one caller giving up must not abort the
	// transaction the others ride in. But once every caller's deadline has
	// passed nobody waits for the outcome, so a hung server holds the
	// writer no longer than that (and never past mysql.query_timeout).
	deadline := time.Now().Add(g.s.queryTimeout)
	latest, unbounded := time.Time{}, false
	for _, c := range callerContexts(live, liveMarks) {
		d, ok := c.Deadline()
		if !ok {
			unbounded = true
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	if !unbounded && latest.Before(deadline) {
		deadline = latest
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	start := time.Now()
	if len(ps) == 0 {
		g.s.writeMarks(ctx, liveMarks)
	} else {
		g.s.writeShared(ctx, ps, liveMarks)
		g.took.Observe(time.Since(start).Seconds())
		g.sizes.Observe(float64(len(ps)))
	}
	cancel()
	g.busy.Add(-1)
	g.finMu.Lock()
	close(g.finished)
	g.finished = make(chan struct{})
	g.finMu.Unlock()
	for _, m := range liveMarks {
		close(m.done)
	}
	if len(ps) == 0 {
		return
	}
	g.batches.Add(1)
	g.appends.Add(int64(len(ps)))
	for _, p := range ps {
		if errors.Is(p.err, persistence.ErrUnavailable) {
			g.s.log.Warn("group commit transaction failed", "appends", len(ps), "error", p.err)
			break
		}
	}
	for _, q := range live {
		close(q.done)
	}
}

// callerContexts are the contexts of the callers waiting for a flush.
func callerContexts(appends []*queuedAppend, marks []*queuedMark) []context.Context {
	cs := make([]context.Context, 0, len(appends)+len(marks))
	for _, q := range appends {
		cs = append(cs, q.ctx)
	}
	for _, m := range marks {
		cs = append(cs, m.ctx)
	}
	return cs
}

// close refuses new appends, lets the writers drain the queue, and waits.
func (g *groupCommitter) close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.queue)
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// GroupCommitStats counts the shared transactions so far.
type GroupCommitStats struct {
	Batches int64 // batches written (each one transaction on the fast path)
	Appends int64 // appends written in them
}

// Collectors are the store's Prometheus instruments: the group commit's
// batch sizes and transaction times (none when group commit is off).
func (s *Store) Collectors() []prometheus.Collector {
	if s.gc == nil {
		return nil
	}
	return []prometheus.Collector{s.gc.sizes, s.gc.took}
}

// GroupCommitStats returns the counters; zero when group commit is off.
func (s *Store) GroupCommitStats() GroupCommitStats {
	if s.gc == nil {
		return GroupCommitStats{}
	}
	return GroupCommitStats{Batches: s.gc.batches.Load(), Appends: s.gc.appends.Load()}
}
