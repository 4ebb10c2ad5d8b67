package memdb

import (
	"strings"
	"sync"

	"github.com/tidwall/btree"

	"github.com/hyapp/roomcell/persistence"
)

// outboxTable is room_outbox in the dev store: the rows by event id and
// five ordered sets of them, changed in place under one lock. It is not a
// go-memdb table because a row went through about nine copy-on-write radix
// writes between its append and its mark, each copying a path of nodes
// with a fresh watch channel: 17% of a dev-mode join's CPU and most of the
// garbage the GC then chased. A B-tree entry here is a pointer.
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
	// event_index): the claim's per-room step.
	room *btree.BTreeG[*outboxEntry]
	// mq holds the MQ-pending rows by (created_at_ms, event_id): the MQ
	// fanout's claim and backlog.
	mq *btree.BTreeG[*outboxEntry]
	// mqRoom holds the MQ-pending rows by (app_code, room_id, room_seq,
	// event_index): the MQ claim's per-room step.
	mqRoom *btree.BTreeG[*outboxEntry]
	// sets lists the five with the rows each holds.
	sets [5]orderedSet
	// leases are the rooms' claim leases (the IM claims').
	leases map[persistence.RoomKey]roomLease
}

type orderedSet struct {
	tree  *btree.BTreeG[*outboxEntry]
	holds func(*outboxEntry) bool
}

func newOutboxTable() *outboxTable {
	opts := btree.Options{NoLocks: true} // mu guards them
	t := &outboxTable{
		byID:   map[string]*outboxEntry{},
		leases: map[persistence.RoomKey]roomLease{},
		status: btree.NewBTreeGOptions(statusLess, opts),
		due:    btree.NewBTreeGOptions(dueLess, opts),
		room:   btree.NewBTreeGOptions(roomLess, opts),
		mq:     btree.NewBTreeGOptions(createdLess, opts),
		mqRoom: btree.NewBTreeGOptions(roomLess, opts),
	}
	t.sets = [...]orderedSet{
		{t.status, func(*outboxEntry) bool { return true }},
		{t.due, (*outboxEntry).pending},
		{t.room, (*outboxEntry).pending},
		{t.mq, (*outboxEntry).mqPending},
		{t.mqRoom, (*outboxEntry).mqPending},
	}
	return t
}

// The orders of the sets. They return at the first field that differs:
// cmp.Or would compare every field first (its arguments are evaluated),
// and the comparisons were a third of a put.

func statusLess(a, b *outboxEntry) bool {
	if c := strings.Compare(a.Status, b.Status); c != 0 {
		return c < 0
	}
	return createdLess(a, b)
}

func dueLess(a, b *outboxEntry) bool {
	if a.NextRetryAtMs != b.NextRetryAtMs {
		return a.NextRetryAtMs < b.NextRetryAtMs
	}
	return a.EventID < b.EventID
}

// roomLess orders a room's rows as they go out: by room_seq, then by the
// event's index in its command (the event id's text would put the 11th
// event of a command before the 2nd).
func roomLess(a, b *outboxEntry) bool {
	if a.RoomSeq == b.RoomSeq && a.EventIndex != b.EventIndex && a.AppCode == b.AppCode && a.RoomID == b.RoomID {
		return a.EventIndex < b.EventIndex
	}
	return roomOrder{a.AppCode, a.RoomID, a.RoomSeq, a.EventID}.less(roomOrder{b.AppCode, b.RoomID, b.RoomSeq, b.EventID})
}

// roomOrder is a row's place in an order by room, then a number, then an
// id: the directory's presence.
type roomOrder struct {
	app, room string
	n         int64
	id        string
}

func (a roomOrder) less(b roomOrder) bool {
	if c := strings.Compare(a.app, b.app); c != 0 {
		return c < 0
	}
	if c := strings.Compare(a.room, b.room); c != 0 {
		return c < 0
	}
	if a.n != b.n {
		return a.n < b.n
	}
	return a.id < b.id
}

// createdLess orders the mq set.
func createdLess(a, b *outboxEntry) bool {
	if a.CreatedAtMs != b.CreatedAtMs {
		return a.CreatedAtMs < b.CreatedAtMs
	}
	return a.EventID < b.EventID
}

// mqPending: the row waits for the MQ fanout (the mq set holds only these).
func (e *outboxEntry) mqPending() bool { return e.MQStatus == persistence.OutboxMQPending }

// get returns the row of eventID or nil. Callers hold mu.
func (t *outboxTable) get(eventID string) *outboxEntry { return t.byID[eventID] }

// put stores e, in place of the row with its event id if there is one.
// Where e keeps the old row's place in a set, it replaces it there in one
// descent instead of a delete and an insert. Callers hold mu for writing.
func (t *outboxTable) put(e *outboxEntry) {
	old := t.byID[e.EventID]
	t.byID[e.EventID] = e
	for _, set := range t.sets {
		in := set.holds(e)
		if old != nil && set.holds(old) && (!in || set.tree.Less(old, e) || set.tree.Less(e, old)) {
			set.tree.Delete(old)
		}
		if in {
			set.tree.Set(e) // replaces old when they sort the same
		}
	}
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
	for _, set := range t.sets {
		if set.holds(e) {
			set.tree.Delete(e)
		}
	}
	delete(t.byID, e.EventID)
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
