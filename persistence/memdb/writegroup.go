package memdb

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/persistence"
)

// writeGroup lets concurrent appends share one go-memdb write transaction
// (the fences, snapshots and gift outcomes an append writes there) and is
// the one writer of the log and outbox rows they stage: every append is
// checked against what is stored and what its group staged before it
// writes, under go-memdb's writer lock, so two appends can never both
// pass a check. A transaction per append was most of what a dev-mode join
// allocated while the log and outbox were go-memdb tables.
//
// It needs no goroutine or timer of its own: the first caller to find no
// group being written writes the queue (its own op and whatever came in
// meanwhile), answers the others, then hands the lead to the first caller
// that queued during its write. Nobody waits for a group to fill: a write
// alone is written at once.
type writeGroup struct {
	db *memdb.MemDB
	// beforeCommit runs under the writer lock just before a transaction
	// that wrote b commits (nil: nothing to do).
	beforeCommit func(b *groupTxn)

	mu      sync.Mutex
	queue   []*writeCall
	writing bool
	largest int // the most ops one transaction has written (tests)
	// alone writes every op in a transaction of its own (benchmarks: the
	// store as it was before groups).
	alone bool
}

// groupTxn is the transaction an op writes in.
type groupTxn struct {
	*memdb.Txn
	// dirty: an op failed after it wrote; the group is written again, an
	// op per transaction. An op that fails without writing leaves it.
	dirty bool
	// logs and outbox hold the room store's appends' log and outbox rows
	// (neither is a go-memdb table), stored just before the commit. The
	// checks of the group's later appends scan them (logStaged,
	// eventStaged); past stagedScan rows the maps hold their keys instead.
	// Three maps made for every group were ~1 KB of each dev-mode join's
	// garbage, and most groups hold a few appends.
	logs     []*persistence.CommandRecord
	outbox   []*outboxEntry
	seqs     map[logKey]bool
	ids      map[commandKey]bool
	eventIDs map[string]bool
}

type logKey struct {
	appCode, roomID string
	seq             int64
}

// stagedScan is how many staged rows the checks scan before they use
// maps.
const stagedScan = 16

// stageLog adds a log row to be stored with the commit.
func (b *groupTxn) stageLog(c *persistence.CommandRecord) {
	b.logs = append(b.logs, c)
	switch {
	case b.seqs != nil:
		b.seqs[logKey{c.AppCode, c.RoomID, c.Seq}] = true
		b.ids[keyOf(c)] = true
	case len(b.logs) > stagedScan:
		b.seqs, b.ids = make(map[logKey]bool, 4*stagedScan), make(map[commandKey]bool, 4*stagedScan)
		for _, l := range b.logs {
			b.seqs[logKey{l.AppCode, l.RoomID, l.Seq}] = true
			b.ids[keyOf(l)] = true
		}
	}
}

// stageOutbox adds an outbox row to be stored with the commit.
func (b *groupTxn) stageOutbox(e *outboxEntry) {
	b.outbox = append(b.outbox, e)
	switch {
	case b.eventIDs != nil:
		b.eventIDs[e.EventID] = true
	case len(b.outbox) > stagedScan:
		b.eventIDs = make(map[string]bool, 4*stagedScan)
		for _, o := range b.outbox {
			b.eventIDs[o.EventID] = true
		}
	}
}

// logStaged reports whether the group staged a log row at c's seq and
// one with c's command_id, in c's room: one scan for both, or the maps.
func (b *groupTxn) logStaged(c *persistence.CommandRecord) (seqTaken, idTaken bool) {
	if b.seqs != nil {
		return b.seqs[logKey{c.AppCode, c.RoomID, c.Seq}], b.ids[keyOf(c)]
	}
	for _, l := range b.logs {
		if l.RoomID == c.RoomID && l.AppCode == c.AppCode {
			seqTaken = seqTaken || l.Seq == c.Seq
			idTaken = idTaken || l.CommandID == c.CommandID
		}
	}
	return seqTaken, idTaken
}

// eventStaged reports whether the group staged an outbox row for id.
func (b *groupTxn) eventStaged(id string) bool {
	if b.eventIDs != nil {
		return b.eventIDs[id]
	}
	for _, o := range b.outbox {
		if o.EventID == id {
			return true
		}
	}
	return false
}

// writeOp writes in b. An op that returns an error must have written
// nothing, or set b.dirty.
type writeOp func(b *groupTxn) error

type writeCall struct {
	op   writeOp
	done chan writeOutcome
}

// writeOutcome is an op's answer, or lead: write the queue now.
type writeOutcome struct {
	err  error
	lead bool
}

// do queues op and returns its outcome once it is written and committed.
func (g *writeGroup) do(op writeOp) error {
	c := &writeCall{op: op, done: make(chan writeOutcome, 1)}
	if g.alone {
		return g.writeSafely([]*writeCall{c})[0]
	}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	lead := !g.writing
	g.writing = true
	g.mu.Unlock()
	if !lead {
		out := <-c.done
		if !out.lead {
			return out.err
		}
	}
	// Leading: write everything queued, this call's op included.
	g.mu.Lock()
	calls := g.queue
	g.queue = nil
	g.largest = max(g.largest, len(calls))
	g.mu.Unlock()
	errs := g.writeSafely(calls)
	var mine error
	for i, q := range calls {
		if q == c {
			mine = errs[i]
			continue
		}
		q.done <- writeOutcome{err: errs[i]}
	}
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.writing = false
		g.mu.Unlock()
	} else {
		next := g.queue[0]
		g.mu.Unlock()
		next.done <- writeOutcome{lead: true}
	}
	return mine
}

// writeSafely is write, with a panic turned into every op's error: a
// leader that died mid-write would otherwise leave the group waiting for
// good.
func (g *writeGroup) writeSafely(calls []*writeCall) (errs []error) {
	defer func() {
		if p := recover(); p != nil {
			errs = make([]error, len(calls))
			for i := range errs {
				errs[i] = fmt.Errorf("memdb: panic while writing: %v: %w", p, persistence.ErrUnavailable)
			}
		}
	}()
	return g.write(calls)
}

// write writes calls in one transaction; if an op fails after it wrote,
// the transaction is dropped and each op is written in its own.
func (g *writeGroup) write(calls []*writeCall) []error {
	errs := make([]error, len(calls))
	b := &groupTxn{Txn: g.db.Txn(true)}
	defer b.Abort()
	for i, c := range calls {
		errs[i] = c.op(b)
		if b.dirty {
			if len(calls) == 1 {
				return errs
			}
			b.Abort()
			for j, c := range calls {
				errs[j] = g.write([]*writeCall{c})[0]
			}
			return errs
		}
	}
	if g.beforeCommit != nil {
		g.beforeCommit(b)
	}
	b.Commit()
	return errs
}
