package memdb

import (
	"slices"
	"sync"

	"github.com/hyapp/roomcell/persistence"
)

// commandLog is room_command_log in the dev store: each room's rows in seq
// order and every logged command_id's seq, under one lock. It left go-memdb
// after room_outbox (outboxtable.go), for the same reason: its radix index
// copied a path of nodes per append and was then half of what a dev-mode
// join allocated. A room's log is appended at its end, read
// from a seq on (replay) and cut from its start (purge), which a slice
// does without a tree.
//
// Lock order: go-memdb's writer lock (an Append's group transaction) may
// be held when mu is taken, never the other way round.
type commandLog struct {
	mu    sync.RWMutex
	rooms map[persistence.RoomKey][]*persistence.CommandRecord
	// ids maps each logged command_id to its seq: the command_id fence of
	// Append and FindCommand's lookup.
	ids map[commandKey]int64
}

type commandKey struct{ appCode, roomID, commandID string }

func keyOf(c *persistence.CommandRecord) commandKey {
	return commandKey{c.AppCode, c.RoomID, c.CommandID}
}

func newCommandLog() *commandLog {
	return &commandLog{rooms: map[persistence.RoomKey][]*persistence.CommandRecord{}, ids: map[commandKey]int64{}}
}

// search returns where seq is or would be in recs.
func search(recs []*persistence.CommandRecord, seq int64) (int, bool) {
	return slices.BinarySearchFunc(recs, seq, func(c *persistence.CommandRecord, seq int64) int {
		switch {
		case c.Seq < seq:
			return -1
		case c.Seq > seq:
			return 1
		}
		return 0
	})
}

// find returns key's row at seq or nil. Callers hold mu.
func (l *commandLog) find(key persistence.RoomKey, seq int64) *persistence.CommandRecord {
	recs := l.rooms[key]
	if i, ok := search(recs, seq); ok {
		return recs[i]
	}
	return nil
}

// after returns key's rows with a seq above afterSeq, in seq order; the
// slice is the log's own. Callers hold mu.
func (l *commandLog) after(key persistence.RoomKey, afterSeq int64) []*persistence.CommandRecord {
	recs := l.rooms[key]
	i, ok := search(recs, afterSeq)
	if ok {
		i++
	}
	return recs[i:]
}

// putAll stores checked rows (no seq or command_id of theirs is taken)
// under the write lock.
func (l *commandLog) putAll(recs []*persistence.CommandRecord) {
	if len(recs) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range recs {
		key := c.Key()
		rows := l.rooms[key]
		if n := len(rows); n == 0 || rows[n-1].Seq < c.Seq {
			rows = append(rows, c) // the usual case: the next seq
		} else {
			i, _ := search(rows, c.Seq)
			rows = slices.Insert(rows, i, c)
		}
		l.rooms[key] = rows
		l.ids[keyOf(c)] = c.Seq
	}
}

// remove deletes the given stored rows and their command ids. Callers
// hold mu for writing.
func (l *commandLog) remove(doomed []*persistence.CommandRecord) {
	gone := make(map[*persistence.CommandRecord]bool, len(doomed))
	rooms := map[persistence.RoomKey]bool{}
	for _, c := range doomed {
		gone[c] = true
		rooms[c.Key()] = true
		delete(l.ids, keyOf(c))
	}
	for key := range rooms {
		rows := slices.DeleteFunc(l.rooms[key], func(c *persistence.CommandRecord) bool { return gone[c] })
		switch {
		case len(rows) == 0:
			delete(l.rooms, key)
		case cap(rows) > 64 && len(rows) < cap(rows)/4:
			// A purge cuts the start of a long log: keep the array small.
			l.rooms[key] = slices.Clone(rows)
		default:
			l.rooms[key] = rows
		}
	}
}
