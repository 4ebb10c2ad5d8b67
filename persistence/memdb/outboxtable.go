package memdb

import (
	"cmp"
	"strings"
	"sync"

	"github.com/tidwall/btree"

	"github.com/hyapp/roomcell/persistence"
)

// outboxTable is room_outbox in the dev store: the rows by event id and
// ordered sets of them, changed in place under one lock. It is not a
// go-memdb table because a row went through about nine copy-on-write radix
// writes between its append and its mark, each copying a path of nodes
// with a fresh watch channel: 17% of a dev-mode join's CPU and most of the
// garbage the GC then chased. A B-tree entry here is a pointer.
//
// A set is as narrow as its readers need, so a row's write touches few and
// small trees: a tree per status (no status compared per node), a tree per
// room for the claims' per-room step (numbers compared, not the room's
// strings, and only that room's rows), and a row's insert and its mark go
// through path hints (rows arrive at a set's end and leave its front).
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
	// byStatus holds every row, a set per status by (created_at_ms,
	// event_id): the oldest-first scans of one status (pending, stats,
	// ListOutbox, the purge's walk over published rows, the claim's walk
	// over pending rows).
	byStatus map[string]*rowSet
	// room holds the pending rows of each room by (room_seq, event_index):
	// the claim's per-room step. A room without pending rows has no set.
	room roomSets
	// mq holds the MQ-pending rows by (created_at_ms, event_id): the MQ
	// fanout's claim and backlog.
	mq *rowSet
	// mqRoom holds the MQ-pending rows of each room by (room_seq,
	// event_index): the MQ claim's per-room step.
	mqRoom roomSets
	// byType holds the rows of an event type by (created_at_ms, event_id),
	// for the types RoomOutboxAfter was asked for (built on its first
	// read of a type, kept from then on): the notice scan of one rare type
	// costs a seek, not a walk over every row since its cursor.
	byType map[string]*rowSet
	// leases are the rooms' claim leases (the IM claims').
	leases map[persistence.RoomKey]roomLease
}

// rowSet is one ordered set of rows with the path hints of its writes:
// rows mostly join at one end and leave at the other, so a hint per
// direction saves most of each descent's comparisons.
type rowSet struct {
	tree     *btree.BTreeG[*outboxEntry]
	ins, del btree.PathHint
}

func newRowSet(less func(a, b *outboxEntry) bool) *rowSet {
	return &rowSet{tree: btree.NewBTreeGOptions(less, btree.Options{NoLocks: true})} // mu guards it
}

func (s *rowSet) set(e *outboxEntry)    { s.tree.SetHint(e, &s.ins) }
func (s *rowSet) delete(e *outboxEntry) { s.tree.DeleteHint(e, &s.del) }

// moved: old and e sort apart in s (e cannot replace old in place).
func (s *rowSet) moved(old, e *outboxEntry) bool { return s.tree.Less(old, e) || s.tree.Less(e, old) }

// roomSets is a set per room, of the rows one claim walks.
type roomSets map[persistence.RoomKey]*rowSet

// move takes old (nil: none) out of its room's set and puts e (nil: none)
// in, both of room key; a set left empty is dropped.
func (m roomSets) move(key persistence.RoomKey, old, e *outboxEntry) {
	s := m[key]
	if old != nil && s != nil && (e == nil || s.moved(old, e)) {
		s.delete(old)
		if e == nil && s.tree.Len() == 0 {
			delete(m, key)
			return
		}
	}
	if e == nil {
		return
	}
	if s == nil {
		s = newRowSet(seqLess)
		m[key] = s
	}
	s.set(e)
}

func newOutboxTable() *outboxTable {
	return &outboxTable{
		byID:     map[string]*outboxEntry{},
		leases:   map[persistence.RoomKey]roomLease{},
		byStatus: map[string]*rowSet{},
		room:     roomSets{},
		mq:       newRowSet(createdLess),
		mqRoom:   roomSets{},
		byType:   map[string]*rowSet{},
	}
}

// statusSet is the set of status, made on first use.
func (t *outboxTable) statusSet(status string) *rowSet {
	s := t.byStatus[status]
	if s == nil {
		s = newRowSet(createdLess)
		t.byStatus[status] = s
	}
	return s
}

// The orders of the sets. They return at the first field that differs:
// cmp.Or would compare every field first (its arguments are evaluated),
// and the comparisons were a third of a put.

// seqLess orders one room's rows as they go out: by room_seq, then by the
// event's index in its command (the event id's text would put the 11th
// event of a command before the 2nd), then by id.
func seqLess(a, b *outboxEntry) bool {
	if a.RoomSeq != b.RoomSeq {
		return a.RoomSeq < b.RoomSeq
	}
	if a.EventIndex != b.EventIndex {
		return a.EventIndex < b.EventIndex
	}
	return a.EventID < b.EventID
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

// createdLess orders the status, mq and type sets.
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
	sn := t.statusSet(e.Status)
	if old != nil {
		if so := t.byStatus[old.Status]; so != sn || so.moved(old, e) {
			so.delete(old)
		}
	}
	sn.set(e)
	if len(t.byType) > 0 {
		if s := t.byType[e.EventType]; s != nil {
			if old != nil && s.moved(old, e) {
				s.delete(old)
			}
			s.set(e)
		}
	}
	if old != nil && old.mqPending() && (!e.mqPending() || t.mq.moved(old, e)) {
		t.mq.delete(old)
	}
	if e.mqPending() {
		t.mq.set(e)
	}
	t.putRooms(old, e)
}

// putRooms moves a row's entry in its room's claim sets (old or e nil:
// none).
func (t *outboxTable) putRooms(old, e *outboxEntry) {
	held := func(x *outboxEntry, in func(*outboxEntry) bool) *outboxEntry {
		if x != nil && in(x) {
			return x
		}
		return nil
	}
	op, ep := held(old, (*outboxEntry).pending), held(e, (*outboxEntry).pending)
	om, em := held(old, (*outboxEntry).mqPending), held(e, (*outboxEntry).mqPending)
	if op == nil && ep == nil && om == nil && em == nil {
		return
	}
	row := cmp.Or(e, old)
	key := persistence.RoomKey{AppCode: row.AppCode, RoomID: row.RoomID}
	if op != nil || ep != nil {
		t.room.move(key, op, ep)
	}
	if om != nil || em != nil {
		t.mqRoom.move(key, om, em)
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
	if s := t.byStatus[e.Status]; s != nil {
		s.delete(e)
	}
	if s := t.byType[e.EventType]; s != nil {
		s.delete(e)
	}
	if e.mqPending() {
		t.mq.delete(e)
	}
	t.putRooms(e, nil)
	delete(t.byID, e.EventID)
}

// typeSet is the set of the rows of eventType, built from every row on
// its first use. Callers hold mu for writing.
func (t *outboxTable) typeSet(eventType string) *rowSet {
	s := t.byType[eventType]
	if s == nil {
		s = newRowSet(createdLess)
		for _, e := range t.byID {
			if e.EventType == eventType {
				s.set(e)
			}
		}
		t.byType[eventType] = s
	}
	return s
}

// pivot is a search key for the ordered sets: only the fields their
// orders read are set.
func pivot(status string, createdAtMs int64, eventID string) *outboxEntry {
	return &outboxEntry{Envelope: &persistence.Envelope{EventID: eventID}, Status: status, CreatedAtMs: createdAtMs}
}

// scanStatus calls fn with the rows of one status from (afterMs, afterID)
// on (inclusive), oldest first, until fn returns false. Callers hold mu.
func (t *outboxTable) scanStatus(status string, afterMs int64, afterID string, fn func(*outboxEntry) bool) {
	if s := t.byStatus[status]; s != nil {
		s.tree.Ascend(pivot(status, afterMs, afterID), fn)
	}
}
