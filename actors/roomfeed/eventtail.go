package roomfeed

import (
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// The room's recent commits as ready-built event messages, kept while
// anyone reads the room: a ListRoomEvents near the head (a client filling
// a gap, a watcher catching up) is a slice of it, answered in the
// mailbox, and the store is read only further back. Without it each read
// copied its rows out of the store and built a message per event (~2 µs
// an event, all garbage): a read of 100 events cost ten GetRooms.
//
// The tail is the room's alone (its feed observer's, on the room's goroutine): made by the room's first read, appended
// by the grain at each commit (the messages a watch push carries, built
// once for both), filled backwards from the store reads that reach it,
// and dropped when the room stops or reloads. It is served only when its
// last commit is the room's head, so it is never stale, and its messages
// are shared with every reply and push and never changed after they are
// built: an append writes past every slice handed out, a trim copies.

// Each event is kept with its protobuf encoding, made once off the
// reply path (at commit, or by the store read that fills the tail): the
// gRPC layer sends a reply's events as those bytes instead of encoding
// 100 messages per read (grpcapi's eventsCodec).

// tailKeep is about how many events the tail keeps: it is trimmed to the
// newest tailKeep once it holds twice as many. ~200 bytes an event and
// ~130 its encoding, so a read room holds at most ~170 KB; a hot room's
// tail is its last ~0.1 s at 3,000 events/s (watchers further behind
// read the store).
const tailKeep = 256

// watchedTailKeep is tailKeep for a room that node feeds watch: a
// watcher cut for falling a buffer behind, or joining late, catches up
// from the tail (slices of messages already built and encoded) instead
// of each reading and encoding the same rows from the store, which at
// 1,000 watchers of a hot room cost more than the watch itself. ~1.3 MB
// at most for such a room.
const watchedTailKeep = 2048

// minTailRetention is the least retention.command_log the config allows:
// the tail serves no event older than the retention (Deps.Retention), so
// it never answers what the store may already have purged, and a read
// below the retained window gets the resync error it always got.
const minTailRetention = time.Minute

// eventTail holds the room's commits after base, in order.
type eventTail struct {
	keep   int // 0: tailKeep
	base   int64
	events []*v1.RoomLogEvent // the commits' events, in room_seq order
	wire   [][]byte           // wire[i] is events[i]'s encoding
	// ends[i] is len(events) after commit base+1+i (a commit may carry no
	// events, so the seqs are not read off the events).
	ends []int
}

func (t *eventTail) head() int64 { return t.base + int64(len(t.ends)) }

// kept is about how many events the tail keeps.
func (t *eventTail) kept() int {
	if t.keep > 0 {
		return t.keep
	}
	return tailKeep
}

// add appends the commit at seq. A seq that does not follow the tail
// (never expected: every commit passes here) restarts it at seq.
// wire holds the events' encodings (encodeEvents).
func (t *eventTail) add(seq int64, events []*v1.RoomLogEvent, wire [][]byte) {
	if seq != t.head()+1 {
		t.reset(seq - 1)
	}
	t.events = append(t.events, events...)
	t.wire = append(t.wire, wire...)
	t.ends = append(t.ends, len(t.events))
	if len(t.events) > 2*t.kept() {
		t.trim(t.kept())
	}
}

// trim keeps the newest whole commits holding at most keep events (the
// newest commit at least), in new arrays: readers keep the old ones.
func (t *eventTail) trim(keep int) {
	total := len(t.events)
	// The first commit boundary from which at most keep events follow.
	i := sort.Search(len(t.ends), func(i int) bool { return total-t.ends[i] <= keep })
	i = min(i, len(t.ends)-1)
	// Commits 0..i go; the tail starts after commit i.
	cut := t.ends[i]
	if i == len(t.ends)-1 {
		// The newest commit alone holds more than keep: keep it.
		if i == 0 {
			return
		}
		i--
		cut = t.ends[i]
	}
	events := make([]*v1.RoomLogEvent, total-cut, 2*t.kept())
	copy(events, t.events[cut:])
	wire := make([][]byte, total-cut, 2*t.kept())
	copy(wire, t.wire[cut:])
	ends := make([]int, 0, len(t.ends)-i-1+t.kept())
	for _, e := range t.ends[i+1:] {
		ends = append(ends, e-cut)
	}
	t.base += int64(i + 1)
	t.events, t.wire, t.ends = events, wire, ends
}

// reset empties the tail at base.
func (t *eventTail) reset(base int64) {
	t.base, t.events, t.wire, t.ends = base, nil, nil, nil
}

// read answers the events after after, about limit, as the store read
// would: whole commits, at least one event (when there is one), at most
// limit commits; wire holds their encodings. ok is false when the tail
// does not reach back to after, or when its first event to serve is older
// than minAgeMs (the store answers then).
func (t *eventTail) read(after int64, limit int, minAgeMs int64) (events []*v1.RoomLogEvent, wire [][]byte, next int64, ok bool) {
	head := t.head()
	if after < t.base || after >= head {
		return nil, nil, 0, false
	}
	k0 := int(after - t.base)
	from := 0
	if k0 > 0 {
		from = t.ends[k0-1]
	}
	if from < len(t.events) && t.events[from].CreatedAtMs < minAgeMs {
		return nil, nil, 0, false
	}
	last := min(len(t.ends), k0+limit) - 1
	// The last commit within limit events of from; and the first commit
	// with events, whatever its size (as the store read: a page holds at
	// least one event, when there is one).
	k := k0 + sort.Search(last-k0+1, func(j int) bool { return t.ends[k0+j]-from > limit }) - 1
	if k < k0 || (t.ends[k] == from && k < last) {
		k++
	}
	to := t.ends[k]
	// Capped: an append to the reply's slice cannot write into the tail.
	return t.events[from:to:to], t.wire[from:to:to], t.base + int64(k) + 1, true
}

// prepend puts the commits after..t.base (events: theirs, in order, every
// seq a commit; wire: their encodings) before the tail, the newest that
// fit within twice the events it keeps.
func (t *eventTail) prepend(after int64, events []*v1.RoomLogEvent, wire [][]byte) {
	if after >= t.base || len(t.events) >= 2*t.kept() {
		return
	}
	n := int(t.base - after)
	counts := make([]int, n)
	for _, e := range events {
		if i := int(e.RoomSeq - after - 1); i >= 0 && i < n {
			counts[i]++
		}
	}
	// The newest commits that fit.
	room, first, take := 2*t.kept()-len(t.events), n, 0
	for first > 0 && take+counts[first-1] <= room {
		first--
		take += counts[first]
	}
	if first == n {
		return
	}
	skip := 0
	for _, c := range counts[:first] {
		skip += c
	}
	merged := make([]*v1.RoomLogEvent, 0, max(2*t.kept(), take+len(t.events)))
	merged = append(merged, events[skip:skip+take]...)
	merged = append(merged, t.events...)
	mergedWire := make([][]byte, 0, cap(merged))
	mergedWire = append(mergedWire, wire[skip:skip+take]...)
	mergedWire = append(mergedWire, t.wire...)
	ends := make([]int, 0, n-first+len(t.ends)+t.kept())
	sum := 0
	for _, c := range counts[first:] {
		sum += c
		ends = append(ends, sum)
	}
	for _, e := range t.ends {
		ends = append(ends, e+take)
	}
	t.base = after + int64(first)
	t.events, t.wire, t.ends = merged, mergedWire, ends
}

// tailFill hands a store read's events to the grain, to extend its tail
// backwards. Not a sign of activity: it follows a read that was one.
type tailFill struct {
	after, next int64
	events      []*v1.RoomLogEvent
	wire        [][]byte
}

func (*tailFill) NotInfluenceReceiveTimeout() {}

// tail is the room's tail, made (empty, at the head) when create is set
// and the room has none. Mailbox only.
func (o *observer) tail(create bool) *eventTail {
	w, identity := &o.f.watch, o.room.Identity()
	if !create && w.n.Load() == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rf := w.rooms[identity]
	if rf == nil {
		if !create {
			return nil
		}
		rf = &roomFeeds{}
		w.rooms[identity] = rf
		w.n.Add(1)
	}
	if rf.tail == nil && create {
		rf.tail = &eventTail{base: o.room.State().Seq}
	}
	return rf.tail
}

// dropTail forgets the room's tail (a reload: the state may have moved
// past commits the tail never saw).
func (o *observer) dropTail() {
	w, identity := &o.f.watch, o.room.Identity()
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	rf := w.rooms[identity]
	if rf == nil {
		return
	}
	rf.tail = nil
	if len(rf.feeds) == 0 {
		delete(w.rooms, identity)
		w.n.Add(-1)
	}
}

// tailRead answers a read from the tail (made here if the room has none),
// with the events' encodings, or nil when the store must.
func (o *observer) tailRead(after, head int64, limit int) (*v1.ListRoomEventsReply, [][]byte) {
	t := o.tail(true)
	if t.head() != head {
		// A commit that did not pass through the tail: start over.
		t.reset(head)
		return nil, nil
	}
	events, wire, next, ok := t.read(after, limit, o.room.Now().Add(-o.f.retention()).UnixMilli())
	if !ok {
		return nil, nil
	}
	return &v1.ListRoomEventsReply{Events: events, NextAfterSeq: next, HeadSeq: head}, wire
}

// fillTail extends the tail backwards with a store read that reaches it.
func (o *observer) fillTail(f *tailFill) {
	t := o.tail(false)
	if t == nil || t.head() != o.room.State().Seq || f.after >= t.base || f.next < t.base {
		return
	}
	t.prepend(f.after, f.events, f.wire)
}

// sendFill sends the grain a store read's events (the commits after
// after, up to next) and their encodings for its tail.
func sendFill(sys *actor.ActorSystem, grain *actor.PID, after, next int64, events []*v1.RoomLogEvent, wire [][]byte) {
	if next <= after {
		return
	}
	sys.Root.Send(grain, &tailFill{after: after, next: next, events: events, wire: wire})
}

// encodeEvents is each event's protobuf encoding (what proto.Marshal
// answers), in one buffer.
func encodeEvents(events []*v1.RoomLogEvent) [][]byte {
	if len(events) == 0 {
		return nil
	}
	size := 0
	for _, e := range events {
		size += proto.Size(e)
	}
	buf := make([]byte, 0, size)
	ends := make([]int, len(events))
	for i, e := range events {
		buf, _ = proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(buf, e)
		ends[i] = len(buf)
	}
	wire := make([][]byte, len(events))
	from := 0
	for i, end := range ends {
		wire[i] = buf[from:end:end]
		from = end
	}
	return wire
}

// retention is the age past which the tail leaves reads to the store.
func (f *Feed) retention() time.Duration {
	if f.Retention < minTailRetention {
		return minTailRetention
	}
	return f.Retention
}
