package roomfeed

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hyapp/roomcell/errclass"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// The room's event log as clients read it (ListRoomEvents) and the
// subscriptions of the nodes' watch feeds (watch.go). The grain only
// answers with its head (the seq its state reflects, read in its mailbox,
// so never stale) and pushes committed events; the log rows are read
// from the store off the mailbox, so a read never holds a command up.

// Limits of one ListRoomEvents.
const (
	DefaultEventsLimit = 100
	MaxEventsLimit     = 1000
)

// ClassTrimmed is the RoomError class an older member sends for a read
// below the retained log; a member of this version sends the code
// (ROOM_EVENTS_TRIMMED) and this class, and reads the code.
const ClassTrimmed = "events_trimmed"

// TrimmedError: the events right after After are no longer kept
// (retention.command_log). The client rebuilds the room with GetRoom, then
// reads on from the seq GetRoom reflects; OldestAfterSeq is the smallest
// after_room_seq the log can serve now.
type TrimmedError struct {
	After, OldestAfterSeq, HeadSeq int64
}

func (e *TrimmedError) Error() string {
	return fmt.Sprintf("room events after seq %d are past retention (oldest after_room_seq still served: %d, head %d); resync with GetRoom",
		e.After, e.OldestAfterSeq, e.HeadSeq)
}

// Unwrap gives the error its code (ROOM_EVENTS_TRIMMED), in the
// precondition class for callers that know only the vocabulary.
func (e *TrimmedError) Unwrap() error { return errTrimmed }

var errTrimmed = errclass.New(errclass.CodeRoomEventsTrimmed)

// rangeLoader is the bounded read of the command log that memdb and MySQL
// offer; a store without it is read whole after the seq and cut.
type rangeLoader interface {
	LoadCommandRange(ctx context.Context, key persistence.RoomKey, afterSeq int64, limit int) ([]persistence.CommandRecord, error)
}

// eventReads bounds the log reads running off the grains' mailboxes on a
// node, so a burst of clients cannot open one store query each at once.
const eventReads = 64

// listEvents answers a ListRoomEventsRequest: the head is read here, in
// the mailbox; the rows after a goroutine's store read.
func (o *observer) listEvents(ctx actor.Context, r *v1.ListRoomEventsRequest) {
	fail := func(err error) {
		ctx.Respond(&v1.RoomEventsResponse{Error: roomgrain.WireError(err)})
	}
	if err := o.room.Ready(ctx); err != nil {
		fail(err)
		return
	}
	state := o.room.State()
	if !state.Exists {
		fail(room.ErrRoomNotFound)
		ctx.Poison(ctx.Self())
		return
	}
	head, after := state.Seq, r.GetAfterRoomSeq()
	switch {
	case after < 0:
		fail(errclass.Invalidf("after_room_seq %d is negative", after))
		return
	case after > head:
		fail(errclass.Invalidf("after_room_seq %d is past the room's head %d", after, head))
		return
	case after == head:
		ctx.Respond(&v1.RoomEventsResponse{Reply: &v1.ListRoomEventsReply{NextAfterSeq: head, HeadSeq: head}})
		return
	}
	limit := int(r.GetLimit())
	if limit <= 0 {
		limit = DefaultEventsLimit
	}
	limit = min(limit, MaxEventsLimit)
	if reply, wire := o.tailRead(after, head, limit); reply != nil { // eventtail.go
		ctx.Respond(answerEvents(ctx.Sender(), ctx.Self(), &v1.RoomEventsResponse{Reply: reply}, wire))
		return
	}
	// The store read also reaches up to the tail, when it is near, so
	// the tail can grow back over this read (eventtail.go).
	fillTo := int64(0)
	if t := o.tail(false); t != nil && after < t.base && t.base-after <= int64(2*t.kept()) {
		fillTo = t.base
	}
	f, store, key, sender, self, sys := o.f, o.room.CommandLog(), o.room.Key(), ctx.Sender(), ctx.Self(), ctx.ActorSystem()
	go func() {
		res, fill, next := f.readEventsFill(store, key, after, head, limit, fillTo)
		wire := encodeEvents(fill)
		var page [][]byte
		if res.Reply != nil {
			page = wire[:len(res.Reply.Events):len(res.Reply.Events)]
		}
		sys.Root.Send(sender, answerEvents(sender, self, res, page))
		sendFill(sys, self, after, next, fill, wire)
	}()
}

// eventsAnswer is a RoomEventsResponse with the encodings of its reply's
// events (wire[i] encodes Reply.Events[i]), for a caller on this node:
// the gRPC layer sends them as they are. It is no message, so a caller
// on another node gets the response alone (answerEvents).
type eventsAnswer struct {
	res  *v1.RoomEventsResponse
	wire [][]byte
}

// answerEvents is what the grain answers to sender: res, with the
// events' encodings when sender is on this node.
func answerEvents(sender, self *actor.PID, res *v1.RoomEventsResponse, wire [][]byte) any {
	if res.Reply == nil || len(wire) != len(res.Reply.Events) || len(wire) == 0 || sender == nil || sender.Address != self.Address {
		return res
	}
	return &eventsAnswer{res: res, wire: wire}
}

// readEvents reads the log rows after after, up to head, whole commands
// only, about limit events.
func (f *Feed) readEvents(store roomgrain.CommandLog, key persistence.RoomKey, after, head int64, limit int) *v1.RoomEventsResponse {
	res, _, _ := f.readEventsFill(store, key, after, head, limit, 0)
	return res
}

// readEventsFill is readEvents that also reads on to fillTo (0: not):
// fill holds the events of every commit read after after, up to next,
// the reply's among them (the same messages).
func (f *Feed) readEventsFill(store roomgrain.CommandLog, key persistence.RoomKey, after, head int64, limit int, fillTo int64) (res *v1.RoomEventsResponse, fill []*v1.RoomLogEvent, next int64) {
	unavailable := func(err error) *v1.RoomEventsResponse {
		f.Logger.Warn("room event log read failed", "app_code", key.AppCode, "room_id", key.RoomID, "error", err)
		return &v1.RoomEventsResponse{Error: &v1.RoomError{Class: errclass.NameUnavailable, Message: "room event log could not be read; retry"}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.StoreTimeout)
	defer cancel()
	reads := f.slots(store)
	select {
	case reads <- struct{}{}:
		defer func() { <-reads }()
	case <-ctx.Done():
		return unavailable(ctx.Err()), nil, 0
	}
	// A command has at least one event as a rule, so limit rows hold at
	// least limit events, or the rest of the log.
	pageRows := min(int64(limit), head-after)
	rows := pageRows
	if fillTo > after {
		rows = max(rows, min(fillTo, head)-after)
	}
	var recs []persistence.CommandRecord
	var err error
	if rl, ok := store.(rangeLoader); ok {
		recs, err = rl.LoadCommandRange(ctx, key, after, int(rows))
	} else if recs, err = store.LoadCommands(ctx, key, after); len(recs) > int(rows) {
		recs = recs[:rows]
	}
	if err != nil {
		return unavailable(err), nil, 0
	}
	if len(recs) == 0 || recs[0].Seq != after+1 {
		// Purged (the log keeps whole prefixes: rows at or below the
		// snapshot, older than the window).
		oldest := head
		if len(recs) > 0 {
			oldest = recs[0].Seq - 1
		}
		te := &TrimmedError{After: after, OldestAfterSeq: oldest, HeadSeq: head}
		return &v1.RoomEventsResponse{Error: &v1.RoomError{Class: ClassTrimmed, Code: uint32(errclass.CodeRoomEventsTrimmed), Message: te.Error()}, OldestAfterSeq: oldest, HeadSeq: head}, nil, 0
	}
	reply := &v1.ListRoomEventsReply{NextAfterSeq: after, HeadSeq: head}
	paged, inPage := 0, true // events of the page, in fill
	next = after
	for i, rec := range recs {
		if rec.Seq != next+1 || rec.Seq > head {
			break // a hole or a row past the head this answer stands for
		}
		if inPage && (int64(i) >= pageRows || (paged > 0 && paged+len(rec.Events) > limit)) {
			inPage = false
		}
		fill = append(fill, logEvents(rec.Events)...)
		next = rec.Seq
		if inPage {
			paged, reply.NextAfterSeq = len(fill), rec.Seq
		}
	}
	if paged > 0 {
		reply.Events = fill[:paged:paged]
	}
	return &v1.RoomEventsResponse{Reply: reply}, fill, next
}

// logEvents is the wire form of a command's envelopes.
func logEvents(envs []persistence.Envelope) []*v1.RoomLogEvent {
	out := make([]*v1.RoomLogEvent, len(envs))
	for i, e := range envs {
		out[i] = &v1.RoomLogEvent{RoomSeq: e.RoomSeq, EventId: e.EventID, EventType: e.EventType,
			Payload: string(e.Payload), CommandId: e.CommandID, CreatedAtMs: e.CreatedAtMs}
	}
	return out
}

// watchRooms holds the feeds subscribed to each room of the node (one
// per node, in its Feed) and the tails of the rooms being read: the grain has
// no field for them, so a room nobody watches or reads pays nothing (the
// grain fills its size class), and a commit looks them up only while the
// node has any.
type watchRooms struct {
	n     atomic.Int64 // rooms with feeds
	seq   atomic.Uint64
	mu    sync.Mutex
	rooms map[string]*roomFeeds
}

type roomFeeds struct {
	activation string
	feeds      []*actor.PID
	// tail: the room's recent events while anyone reads it (eventtail.go);
	// the grain's alone.
	tail *eventTail
}

func (w *watchRooms) get(identity string) *roomFeeds {
	if w.n.Load() == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rooms[identity]
}

// watchSubscribe adds a feed to the room's subscribers (again: no-op)
// and answers the activation that holds it, with the head.
func (o *observer) watchSubscribe(ctx actor.Context, m *v1.RoomWatchSubscribe) *v1.RoomWatchAck {
	fail := func(err error) *v1.RoomWatchAck {
		return &v1.RoomWatchAck{Error: roomgrain.WireError(err)}
	}
	if err := o.room.Ready(ctx); err != nil {
		return fail(err)
	}
	state := o.room.State()
	if !state.Exists {
		ctx.Poison(ctx.Self())
		return fail(room.ErrRoomNotFound)
	}
	pid := actor.NewPID(m.GetAddress(), m.GetId())
	w, identity := &o.f.watch, o.room.Identity()
	w.mu.Lock()
	rf := w.rooms[identity]
	if rf == nil {
		rf = &roomFeeds{}
		w.rooms[identity] = rf
		w.n.Add(1)
	}
	if rf.activation == "" {
		rf.activation = ctx.Self().Address + "#" + strconv.FormatUint(w.seq.Add(1), 10)
	}
	if rf.tail == nil {
		// Watchers catch up through ListEvents (a cut one, a late push):
		// from the commits' own messages, not the store.
		rf.tail = &eventTail{base: state.Seq}
	}
	rf.tail.keep = watchedTailKeep
	known := false
	for _, p := range rf.feeds {
		known = known || p.Equal(pid)
	}
	if !known {
		rf.feeds = append(rf.feeds, pid)
	}
	activation := rf.activation
	w.mu.Unlock()
	if !known {
		ctx.Watch(pid)
	}
	return &v1.RoomWatchAck{Activation: activation, HeadSeq: state.Seq,
		GrainAddress: ctx.Self().Address, GrainId: ctx.Self().Id}
}

// watchPush sends a committed command's events to the room's feeds and
// appends them to its tail: one set of messages for both. A send never
// blocks: a feed's mailbox is unbounded and the feed cuts its own slow
// readers.
func (o *observer) watchPush(seq int64, envs []persistence.Envelope) {
	w := &o.f.watch
	rf := w.get(o.room.Identity())
	if rf == nil {
		return
	}
	w.mu.Lock()
	feeds, activation, tail := rf.feeds, rf.activation, rf.tail
	w.mu.Unlock()
	events := logEvents(envs)
	var wire [][]byte
	if tail != nil || len(feeds) > 0 {
		wire = encodeEvents(events)
	}
	if tail != nil {
		tail.add(seq, events, wire)
	}
	if len(events) == 0 || len(feeds) == 0 {
		return
	}
	push := &v1.RoomWatchPush{Activation: activation, RoomSeq: seq, Events: events}
	var local *localPush
	for _, pid := range feeds {
		if pid.Address != o.self.Address {
			o.root.Send(pid, push)
			continue
		}
		if local == nil {
			local = &localPush{RoomWatchPush: push, wire: wire}
		}
		o.root.Send(pid, local)
	}
}

// localPush is a push to a feed on the room's node, with its events'
// encodings (wire[i] encodes Events[i]): the feed's watchers send them as
// they are. It is no message: a feed on another node gets the push alone.
type localPush struct {
	*v1.RoomWatchPush
	wire [][]byte
}

// watchTerminated drops a feed that stopped.
func (o *observer) watchTerminated(who *actor.PID) {
	w, identity := &o.f.watch, o.room.Identity()
	w.mu.Lock()
	defer w.mu.Unlock()
	rf := w.rooms[identity]
	if rf == nil {
		return
	}
	feeds := rf.feeds[:0:0]
	for _, p := range rf.feeds {
		if !p.Equal(who) {
			feeds = append(feeds, p)
		}
	}
	rf.feeds = feeds
	if len(feeds) == 0 && rf.tail == nil {
		delete(w.rooms, identity)
		w.n.Add(-1)
	}
}

// watchEnd tells the feeds this activation stops: they end their
// streams with the seq to resume from. The room's tail goes with it.
func (o *observer) watchEnd() {
	w, identity := &o.f.watch, o.room.Identity()
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	rf := w.rooms[identity]
	if rf != nil {
		delete(w.rooms, identity)
		w.n.Add(-1)
	}
	w.mu.Unlock()
	if rf == nil {
		return
	}
	end := &v1.RoomWatchEnd{Activation: rf.activation, HeadSeq: o.room.State().Seq}
	for _, pid := range rf.feeds {
		o.root.Send(pid, end)
	}
}
