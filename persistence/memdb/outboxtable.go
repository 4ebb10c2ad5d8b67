package memdb

import (
	"cmp"
	"sync"

	"github.com/tidwall/btree"

	"github.com/hyapp/roomcell/persistence"
)

// outboxTable is room_outbox in the dev store: the rows by event id and
// four ordered sets of them, changed in place under one lock. It is not a
// go-memdb table because a row went through about nine copy-on-write radix
// writes between its append and its mark, each copying a path of nodes
// with a fresh watch channel: 17% of a dev-mode join's CPU and most of the
// garbage the GC then chased (issue 13). A B-tree entry here is a pointer.
//
// Rows are never changed once stored: an update stores a new entry in the
// old one's place (put), so an ordered set can always find an entry by
// the fields it was inserted with.
//
// Lock order: go-memdb's writer lock (an Append's group transaction) may be
// held when mu is taken, never the other way round.
type outboxTable struct {
	mu   sync.RWMutex
	byID map[string]*outboxEntry
	// status holds every row by (status, created_at_ms, event_id): the
	// oldest-first scans of one status (pending, stats, ListOutbox, the
	// purge's walk over published rows, the notices' scan).
	status *btree.BTreeG[*outboxEntry]
	// due holds the pending rows by (next_retry_at_ms, event_id): the
	// relay's claim, without walking rows that wait for a retry.
	due *btree.BTreeG[*outboxEntry]
	// room holds the pending rows by (app_code, room_id, room_seq,
	// event_id): the claim's per-room step.
	room *btree.BTreeG[*outboxEntry]
	// mq holds the MQ-pending rows by (created_at_ms, event_id): the MQ
	// fanout's claim and backlog.
	mq *btree.BTreeG[*outboxEntry]
}

func newOutboxTable() *outboxTable {
	opts := btree.Options{NoLocks: true} // mu guards them
	return &outboxTable{
		byID: map[string]*outboxEntry{},
		status: btree.NewBTreeGOptions(func(a, b *outboxEntry) bool {
			return cmp.Or(cmp.Compare(a.Status, b.Status), cmp.Compare(a.CreatedAtMs, b.CreatedAtMs), cmp.Compare(a.EventID, b.EventID)) < 0
		}, opts),
		due: btree.NewBTreeGOptions(func(a, b *outboxEntry) bool {
			return cmp.Or(cmp.Compare(a.NextRetryAtMs, b.NextRetryAtMs), cmp.Compare(a.EventID, b.EventID)) < 0
		}, opts),
		room: btree.NewBTreeGOptions(func(a, b *outboxEntry) bool {
			return cmp.Or(cmp.Compare(a.AppCode, b.AppCode), cmp.Compare(a.RoomID, b.RoomID),
				cmp.Compare(a.RoomSeq, b.RoomSeq), cmp.Compare(a.EventID, b.EventID)) < 0
		}, opts),
		mq: btree.NewBTreeGOptions(func(a, b *outboxEntry) bool {
			return cmp.Or(cmp.Compare(a.CreatedAtMs, b.CreatedAtMs), cmp.Compare(a.EventID, b.EventID)) < 0
		}, opts),
	}
}

// mqPending: the row waits for the MQ fanout (the mq set holds only these).
func (e *outboxEntry) mqPending() bool { return e.MQStatus == persistence.OutboxMQPending }

// get returns the row of eventID or nil. Callers hold mu.
func (t *outboxTable) get(eventID string) *outboxEntry { return t.byID[eventID] }

// put stores e, in place of the row with its event id if there is one.
// Callers hold mu for writing.
func (t *outboxTable) put(e *outboxEntry) {
	if old := t.byID[e.EventID]; old != nil {
		t.unindex(old)
	}
	t.byID[e.EventID] = e
	for _, set := range t.setsOf(e) {
		set.Set(e)
	}
}

// setsOf lists the ordered sets that hold e.
func (t *outboxTable) setsOf(e *outboxEntry) []*btree.BTreeG[*outboxEntry] {
	sets := append(make([]*btree.BTreeG[*outboxEntry], 0, 4), t.status)
	if e.pending() {
		sets = append(sets, t.due, t.room)
	}
	if e.mqPending() {
		sets = append(sets, t.mq)
	}
	return sets
}

// putAll stores rows under the write lock.
func (t *outboxTable) putAll(rows []*outboxEntry) {
	if len(rows) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range rows {
		t.put(e)
	}
}

// remove deletes the stored row e. Callers hold mu for writing.
func (t *outboxTable) remove(e *outboxEntry) {
	t.unindex(e)
	delete(t.byID, e.EventID)
}

func (t *outboxTable) unindex(e *outboxEntry) {
	for _, set := range t.setsOf(e) {
		set.Delete(e)
	}
}

// pivot is a search key for the ordered sets: only the fields their
// orders read are set.
func pivot(status string, createdAtMs int64, eventID string) *outboxEntry {
	return &outboxEntry{Envelope: &persistence.Envelope{EventID: eventID}, Status: status, CreatedAtMs: createdAtMs}
}

// scanStatus calls fn with the rows of one status from (afterMs, afterID)
// on (inclusive), oldest first, until fn returns false. Callers hold mu.
func (t *outboxTable) scanStatus(status string, afterMs int64, afterID string, fn func(*outboxEntry) bool) {
	t.status.Ascend(pivot(status, afterMs, afterID), func(e *outboxEntry) bool {
		return e.Status == status && fn(e)
	})
}
