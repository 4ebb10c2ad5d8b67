// Package outboxmarks marks the outbox rows of events a room's publisher
// sent (IM accepted them) as published, in batches: one store write for
// the marks of many rooms. The node's wiring makes one per room database
// and hands it to the room grains (roomgrain.Deps.Marks).
package outboxmarks

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/persistence"
)

// Bounds of a batched mark: a mark waits at most markLinger for others to
// join it (plus the store write in flight before it), and one write marks
// at most maxMarkBatch rows.
const (
	markLinger   = 5 * time.Millisecond
	maxMarkBatch = 500
)

// Store is the one store call the batcher makes.
type Store interface {
	MarkOutboxPublishedBatch(ctx context.Context, eventIDs []string, nowMs int64) error
}

// Batcher marks the rows of sync-published events published in
// batches: one store write per flush instead of one per event (on
// MariaDB with group commit, the write rides the next transaction of
// the rooms' appends instead of a commit of its own). Only events IM accepted are ever added, so a row is never
// marked before its send succeeded. A mark that never lands (crash
// between the send and the flush, store error) leaves the row pending
// under the publisher's lease: the relay sends it again after the lease
// and clients drop the repeat by event_id.
//
// It needs no Close: the flushing goroutine runs only while marks are
// queued and ends when the queue is empty.
type Batcher struct {
	store   Store
	clock   func() time.Time
	timeout time.Duration
	log     *slog.Logger
	worker  string // the publisher's worker name in its log lines

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []markItem
	running bool
	added   uint64 // marks ever added
	settled uint64 // marks whose write has finished (landed or failed)
}

// New makes the batcher of one room database: each write bounded by
// timeout, its failures logged on log as worker's (the publisher's
// worker name, seed 000's log fields).
func New(store Store, clock func() time.Time, timeout time.Duration, log *slog.Logger, worker string) *Batcher {
	m := &Batcher{store: store, clock: clock, timeout: timeout, log: log, worker: worker}
	m.cond = sync.NewCond(&m.mu)
	return m
}

// markItem is one queued mark: the event, and what to do if its mark
// never lands.
type markItem struct {
	env persistence.Envelope
	// lost runs when the write failed: the room's publisher stops sending
	// in order, so its next events go through a catch-up, which claims
	// the unmarked row again. Otherwise the row, once its lease ended,
	// would sit pending under a publisher that kept leasing the room's
	// new rows, and no relay takes a room whose rows another owner holds:
	// it waited until the room went quiet, minutes under load.
	lost func()
}

// Add queues env's row to be marked published; lost (may be nil) runs if
// the mark fails. Call it only after IM accepted the event.
func (m *Batcher) Add(env persistence.Envelope, lost func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue = append(m.queue, markItem{env, lost})
	m.added++
	if !m.running {
		m.running = true
		go m.loop()
	}
}

// Wait returns once every mark added before the call has been written (or
// its write failed). A catch-up waits so that its claim does not pick up,
// and send again, rows whose marks were still queued.
func (m *Batcher) Wait() {
	m.mu.Lock()
	defer m.mu.Unlock()
	target := m.added
	for m.settled < target {
		m.cond.Wait()
	}
}

func (m *Batcher) loop() {
	for {
		m.mu.Lock()
		short := len(m.queue) < maxMarkBatch
		m.mu.Unlock()
		if short {
			// Let the rest of a burst (a coalesced IM message's events,
			// the next command's) join this write.
			time.Sleep(markLinger)
		}
		m.mu.Lock()
		n := min(len(m.queue), maxMarkBatch)
		if n == 0 {
			m.running = false
			m.mu.Unlock()
			return
		}
		batch := make([]markItem, n)
		copy(batch, m.queue)
		m.queue = m.queue[n:]
		if len(m.queue) == 0 {
			m.queue = nil // let a burst's backing array go
		}
		m.mu.Unlock()
		m.flush(batch)
		m.mu.Lock()
		m.settled += uint64(n)
		m.cond.Broadcast()
		m.mu.Unlock()
	}
}

func (m *Batcher) flush(batch []markItem) {
	ids := make([]string, len(batch))
	for i, it := range batch {
		ids[i] = it.env.EventID
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	err := m.store.MarkOutboxPublishedBatch(ctx, ids, m.clock().UnixMilli())
	cancel()
	if err != nil {
		// One line per failed write, not per row: at worst the relay
		// publishes these again after their lease; clients dedupe by
		// event_id.
		for _, it := range batch {
			if it.lost != nil {
				it.lost()
			}
		}
		supervise.EventLogger(m.log, m.worker, batch[0].env).Warn("mark published failed after sync publish",
			slog.String("path", "sync"), slog.Int("retry_count", 0), slog.String("status", persistence.OutboxPending),
			slog.Int("events", len(batch)), slog.String("error", supervise.ErrorText(err)))
	}
}
