package roomfeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hyapp/roomcell/errclass"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// Watcher serves WatchRoom on one node. All watchers of one room on the
// node share one feed: a local actor subscribed to the room's owner grain,
// which pushes each commit's events to it (events.go). The feed appends
// every push to its own log, shared by its watchers, and wakes them
// without ever waiting; each watcher reads on from its own place in it.
// Only a watcher whose client holds it up is cut: more than Buffer
// commits behind while one send has waited SendStall, or while sending
// and more than maxHeldBuffers buffers behind. One behind for the node's
// own reasons (its linger, a goroutine the scheduler held back) is never
// cut: its linger ends once it is half a buffer behind, and past
// maxHeldBuffers buffers the log lets its place go and it reads what it
// missed from the room's log. Each watcher checks its own sequence: a
// push that does not follow the last seq it sent, and every head the
// feed learns, is filled from the log (ListEvents), so a lost push costs
// a read, never a gap.
//
// The stream ends with a *WatchEndedError (retryable, with the seq to
// resume after) when the room's activation stops or moves, the owner
// stops answering the feed's periodic check, or the node closes the
// Watcher (drain).
type Watcher struct {
	Client Client
	// Buffer is how many commits a watcher may have waiting; default
	// 1024. The commits are the feed's, one copy for all its watchers:
	// a watcher holds only its place. (Its own channel of 128 was 1 KB a
	// watcher, and too short for a burst: a feed goroutine the scheduler
	// held back 50 ms at 3,000 commits/s handed over more at once, and
	// cut watchers that were keeping up.)
	Buffer int
	// CheckInterval is how often a feed asks the room for its activation
	// and head (default 2s): it finds an owner gone silent (frozen, cut
	// off) and pushes lost at the tail.
	CheckInterval time.Duration
	// Page is the most events one catch-up read asks for (default 500).
	Page int
	// SendStall is how long one send may wait on its client, with the
	// watcher more than Buffer commits behind, before the watcher is cut
	// (default 2s). A send waits when the stream's flow-control window is
	// spent: the client is not reading. (At 500ms, a client process that
	// shared the server's two cores was cut a connection at a time when
	// the machine was busy, and the resumes cost more than the waits.)
	SendStall time.Duration
	// Linger is how long a watcher waits after sending before it looks
	// for more (default 5ms; negative: never): a hot room's commits then
	// reach each watcher a few at a time, one wake-up of its goroutine
	// for them all, instead of one per commit. At 3,000 commits/s, 1,000
	// watchers woken per commit were 3M wake-ups a second, and their run
	// queue stood in front of the room's own commands. A quiet room's
	// event still goes out at once (the wait follows a send). The wait
	// grows with the room's watchers on the node (lingerFor): Linger once
	// per 100 of them, or longer when their rounds (take, send) measured
	// in wall time would take more than half a core, at most 100ms; the
	// node's messages for one hot room stay bounded however many watch it
	// and fewer, larger ones when the machine is busy. A linger never
	// leaves a watcher half a buffer behind (the feed urges it out).
	Linger  time.Duration
	Metrics *WatchMetrics // nil: none
	Logger  *slog.Logger

	mu     sync.Mutex
	feeds  map[string]*feed
	closed bool
}

// WatchEndedError ends a stream that the client resumes with
// after_room_seq = ResumeAfter, on any node.
type WatchEndedError struct {
	ResumeAfter int64
	Cut         bool // the reader was too slow for its buffer
	Reason      string
}

func (e *WatchEndedError) Error() string {
	return fmt.Sprintf("room watch ended (%s); resume with after_room_seq %d", e.Reason, e.ResumeAfter)
}

// Unwrap: retryable, like every outage; the code says whether the reader
// was cut (ROOM_WATCH_CUT) or the stream ended (ROOM_WATCH_ENDED).
func (e *WatchEndedError) Unwrap() error {
	if e.Cut {
		return errWatchCut
	}
	return errWatchEnded
}

var (
	errWatchEnded = errclass.New(errclass.CodeRoomWatchEnded)
	errWatchCut   = errclass.New(errclass.CodeRoomWatchCut)
)

// WatchMetrics counts the node's open streams and their ends.
type WatchMetrics struct {
	Open  prometheus.Gauge
	Cuts  prometheus.Counter
	Ended *prometheus.CounterVec
}

// NewWatchMetrics registers the watch metrics on reg (nil: unregistered).
func NewWatchMetrics(reg prometheus.Registerer) (*WatchMetrics, error) {
	m := &WatchMetrics{
		Open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "roomcell_watch_streams_open",
			Help: "WatchRoom streams open on this node."}),
		Cuts: prometheus.NewCounter(prometheus.CounterOpts{Name: "roomcell_watch_cuts_total",
			Help: "WatchRoom streams cut because the reader fell a whole buffer behind."}),
		Ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roomcell_watch_ended_total",
			Help: "WatchRoom streams ended by the server with a resume seq, by reason."}, []string{"reason"}),
	}
	// Every reason's series exists at zero from the start: a panel shows
	// no ends as 0, not as no data.
	for _, r := range []string{EndMoved, EndCut, EndDraining, EndLost} {
		m.Ended.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Open, m.Cuts, m.Ended} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Reasons a stream ends (WatchEndedError.Reason, the metric's label).
const (
	EndMoved    = "room_moved"
	EndCut      = "slow_reader"
	EndDraining = "node_draining"
	EndLost     = "owner_unreachable"
)

// pushItem is one commit (events set) or a head the feed learned (events
// nil); shared by every watcher of the feed, never changed. wire holds
// the events' encodings, made once for every watcher (nil: none).
// frame is the events field of wire in the feed's arena (frameArena),
// starting at from; nil when wire is.
type pushItem struct {
	seq    int64
	events []*v1.RoomLogEvent
	wire   [][]byte
	arena  *frameArena
	from   int
	frame  []byte
}

type sub struct {
	next atomic.Uint64 // the feed's log index of the next item to read
	wake chan struct{} // cap 1: a pending wake-up stands for any number of pushes
	// waiting: the watcher is about to wait on wake or waits; the feed
	// wakes no other (one lingering or sending takes on its own).
	waiting atomic.Bool
	// urge (cap 1) ends a linger: the watcher is half a buffer behind.
	urge chan struct{}
	// sending is the clock when the watcher's send under way began (0:
	// none): the feed cuts only a watcher its client holds up.
	sending atomic.Int64
	end     chan struct{}
	once    sync.Once
	why     string // set before end closes
}

func (s *sub) stop(why string) {
	s.once.Do(func() {
		s.why = why
		close(s.end)
	})
}

// feedLog is a feed's recent items: items[0] is item number first. A
// new feedLog is stored for each push; its items are only appended to
// past every published length, or copied: a reader's view never changes.
type feedLog struct {
	first uint64
	items []*pushItem
}

func (l *feedLog) end() uint64 { return l.first + uint64(len(l.items)) }

type feed struct {
	w        *Watcher
	identity string
	pid      *actor.PID
	mu       sync.Mutex
	subs     map[*sub]struct{}
	head     int64        // newest head the feed knows
	watchers atomic.Int64 // len(subs), read without mu
	// roundNs is the wall time of a watcher's round (take, deliver,
	// send), ns, averaged over the recent rounds of all (lingerFor);
	// updates that race lose one sample.
	roundNs atomic.Int64
	// log holds the feed's recent items, written under mu and read by
	// the watchers without it: each wake-up of a thousand watchers
	// queued on mu behind the fanout that woke them.
	log      atomic.Pointer[feedLog]
	arena    *frameArena // where fanout frames the items (watchframes.go)
	done     bool
	stopTick chan struct{}
	// ready closes when the first subscription answered; startErr is
	// its error.
	ready    chan struct{}
	startErr error
}

func (w *Watcher) defaults() {
	if w.Buffer <= 0 {
		w.Buffer = 1024
	}
	if w.CheckInterval <= 0 {
		w.CheckInterval = 2 * time.Second
	}
	if w.Page <= 0 {
		w.Page = 500
	}
	if w.SendStall <= 0 {
		w.SendStall = 2 * time.Second
	}
	if w.Linger == 0 {
		w.Linger = 5 * time.Millisecond
	}
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
}

// Watch streams the room's events after after to send until ctx ends or
// the stream is ended (a *WatchEndedError or a *TrimmedError). send is
// called from this goroutine only, one room_seq at a time.
func (w *Watcher) Watch(ctx context.Context, app, roomID string, after int64, send func(*v1.WatchRoomReply) error) error {
	return w.WatchAccepted(ctx, app, roomID, after, nil, send)
}

// WatchAccepted is Watch that calls accepted (when not nil) once the
// room's owner has taken the watch, before the catch-up and any event:
// an error from it ends the watch.
func (w *Watcher) WatchAccepted(ctx context.Context, app, roomID string, after int64, accepted func() error, send func(*v1.WatchRoomReply) error) error {
	return w.WatchMessages(ctx, app, roomID, after, false, accepted, func(m Message) error { return send(m.Reply) })
}

// Message is one message of a watch: its reply and, when known, its
// events' encodings (Wire[i] encodes Reply.Events[i]; nil: none), made
// once for every watcher. Shared: never changed.
type Message struct {
	Reply *v1.WatchRoomReply
	Wire  [][]byte
}

// batchCap is the room a batch's arrays start with: most batches of a
// busy room fit (the rest grow).
const batchCap = 64

// A watcher lingers (Watcher.Linger) once per lingerPer watchers of its
// room on the node, or longer when their rounds on the node would take
// more than fanoutShare of a core; at most maxLinger.
const (
	lingerPer      = 100
	fanoutShare    = 0.5
	maxLinger      = 100 * time.Millisecond
	maxRoundSample = 10 * time.Millisecond
)

// lingerFor is how long a watcher of f waits after a round: Linger once
// per lingerPer watchers (the node's messages for one room stay near
// lingerPer ÷ Linger a second however many watch it: waking a watcher
// costs what its round's wall time does not show), or longer when f's
// watchers' rounds, one each per wait, would take more than fanoutShare
// of a core (a round measured in wall time: one that waits for the CPU
// counts, so a busy machine makes messages fewer and larger).
func (w *Watcher) lingerFor(f *feed) time.Duration {
	n := f.watchers.Load()
	wait := max(w.Linger*time.Duration(max(n/lingerPer, 1)), time.Duration(float64(n*f.roundNs.Load())/fanoutShare))
	return min(wait, max(w.Linger, maxLinger))
}

// MaxBatchEvents is the most events one message of a batch watch
// carries (when one room_seq has more, its message carries them all).
const MaxBatchEvents = 512

// WatchMessages is WatchAccepted with the events' encodings; with batch
// a message carries the events of as many consecutive room_seqs as are
// waiting (up to MaxBatchEvents), its RoomSeq the newest of them.
func (w *Watcher) WatchMessages(ctx context.Context, app, roomID string, after int64, batch bool, accepted func() error, send func(Message) error) error {
	return w.watch(ctx, app, roomID, after, accepted, &batcher{batch: batch, send: send})
}

// WatchFrames is WatchMessages with each message as its events field,
// framed once on the node for every watcher (watchframes.go): what the
// gRPC server writes as it is.
func (w *Watcher) WatchFrames(ctx context.Context, app, roomID string, after int64, batch bool, accepted func() error, send func(Frames) error) error {
	return w.watch(ctx, app, roomID, after, accepted, &batcher{batch: batch, sendFrames: send})
}

func (w *Watcher) watch(ctx context.Context, app, roomID string, after int64, accepted func() error, out *batcher) error {
	identity, err := roomgrain.Identity(app, roomID)
	if err != nil {
		return err
	}
	if after < 0 {
		return errclass.Invalidf("after_room_seq %d is negative", after)
	}
	f, s, head, inLog, err := w.join(ctx, identity, after)
	if err != nil {
		return err
	}
	if w.Metrics != nil {
		w.Metrics.Open.Inc()
		defer w.Metrics.Open.Dec()
	}
	defer f.leave(s)
	if after > head {
		// As ListRoomEvents refuses it: a cursor from nowhere would skip
		// the events up to it without a word.
		return errclass.Invalidf("after_room_seq %d is past the room's head %d", after, head)
	}
	if accepted != nil {
		if err := accepted(); err != nil {
			return err
		}
	}
	out.sub = s
	// last is the newest seq handed to out; out sends it before the
	// stream can end with a resume seq (every fill and every round
	// flushes it).
	last := after
	// fill sends the log after last up to at least upTo.
	fill := func(upTo int64) error {
		if last >= upTo {
			return nil
		}
		if err := out.flush(); err != nil {
			return err
		}
		for last < upTo {
			page, err := w.Client.ListEventsPage(ctx, &v1.ListRoomEventsRequest{AppCode: app, RoomId: roomID, AfterRoomSeq: last, Limit: int32(w.Page)})
			if err != nil {
				if !errors.Is(err, errclass.Unavailable) || ctx.Err() != nil {
					return err // trimmed, not found, canceled: said as it is
				}
				return w.ended(last, EndLost)
			}
			reply := page.Reply
			if reply.NextAfterSeq <= last {
				// The owner's head is below what was pushed: a new owner
				// that has not yet seen it cannot be; end and let the
				// client resume.
				return w.ended(last, EndMoved)
			}
			if err := out.groups(reply.Events, page.Wire, last); err != nil {
				return err
			}
			if err := out.flush(); err != nil {
				return err
			}
			last = reply.NextAfterSeq
		}
		return nil
	}
	// deliver hands one item to out, filling from the log what it skips.
	deliver := func(it *pushItem) error {
		if it.events == nil || it.seq > last+1 {
			upTo := it.seq
			if it.events != nil {
				upTo = it.seq - 1
			}
			if err := fill(upTo); err != nil {
				return err
			}
		}
		if it.events == nil || it.seq <= last {
			return nil
		}
		if err := out.add(it.seq, it.events, it.wire, it); err != nil {
			return err
		}
		last = it.seq
		return nil
	}
	if inLog {
		// The feed's log holds what it missed (a watcher resuming after
		// a cut, or a reconnect): framed already, no read at the room.
		for _, it := range f.take(s) {
			if err := deliver(it); err != nil {
				return err
			}
		}
	}
	if err := fill(head); err != nil {
		return err
	}
	var linger *time.Timer // made on the first wait: an idle watcher has none
	for {
		// Marked before it looks, and the feed publishes before it
		// looks at the mark: a push either is seen here or wakes it.
		s.waiting.Store(true)
		if l := f.log.Load(); l == nil || s.next.Load() >= l.end() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-s.end:
				return w.ended(last, s.why)
			case <-s.wake:
			}
		}
		s.waiting.Store(false)
		select {
		case <-s.end: // cut meanwhile: nothing more to read for it
			return w.ended(last, s.why)
		default:
		}
		round := clock()
		items := f.take(s)
		if len(items) == 0 {
			continue // a wake-up left from an earlier push
		}
		for _, it := range items {
			if err := deliver(it); err != nil {
				return err
			}
		}
		if err := out.flush(); err != nil {
			return err
		}
		f.measureRound(clock() - round)
		if w.Linger <= 0 {
			continue
		}
		wait := w.lingerFor(f)
		if linger == nil {
			linger = time.NewTimer(wait)
			defer linger.Stop()
		} else {
			linger.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.end:
			return w.ended(last, s.why)
		case <-linger.C:
		case <-s.urge:
			// Half a buffer behind: the node's linger never makes it a
			// buffer behind (the timer's pending tick is dropped by the
			// next Reset).
		}
	}
}

func (w *Watcher) ended(last int64, why string) error {
	if w.Metrics != nil {
		w.Metrics.Ended.WithLabelValues(why).Inc()
	}
	return &WatchEndedError{ResumeAfter: last, Cut: why == EndCut, Reason: why}
}

// batcher makes a watcher's messages: one per room_seq, or with batch
// the room_seqs handed to it until flush (or MaxBatchEvents) in one;
// Messages for send, or Frames for sendFrames.
type batcher struct {
	batch      bool
	send       func(Message) error
	sendFrames func(Frames) error
	sub        *sub // its sends are marked on it (sub.sending)
	seq        int64
	events     []*v1.RoomLogEvent
	wire       [][]byte
	// encoded: every event added since the last flush came with its
	// encoding.
	encoded bool
	pieces  []piece // Frames: the runs of the batch
	count   int     // events held
}

// emit sends m or fr, marked on the watcher as a send under way.
func (b *batcher) emit(m Message, fr Frames) error {
	if b.sub == nil {
		return b.send1(m, fr)
	}
	b.sub.sending.Store(clock())
	err := b.send1(m, fr)
	b.sub.sending.Store(0)
	return err
}

func (b *batcher) send1(m Message, fr Frames) error {
	if b.sendFrames != nil {
		return b.sendFrames(fr)
	}
	return b.send(m)
}

// add sends or holds the events of seq (wire: their encodings, or nil;
// it: the feed's item they come from, or nil).
func (b *batcher) add(seq int64, events []*v1.RoomLogEvent, wire [][]byte, it *pushItem) error {
	if len(wire) != len(events) {
		wire = nil
	}
	if b.sendFrames != nil {
		return b.addFrame(seq, events, wire, it)
	}
	if !b.batch {
		return b.emit(Message{Reply: &v1.WatchRoomReply{RoomSeq: seq, Events: events}, Wire: wire}, Frames{})
	}
	if b.count > 0 && b.count+len(events) > MaxBatchEvents {
		if err := b.flush(); err != nil {
			return err
		}
	}
	if b.count == 0 {
		b.encoded = true
	}
	b.encoded = b.encoded && wire != nil
	if b.events == nil {
		b.events = make([]*v1.RoomLogEvent, 0, batchCap)
		b.wire = make([][]byte, 0, batchCap)
	}
	// Appended into the batcher's own arrays: the items' are shared.
	b.events = append(b.events, events...)
	if b.encoded {
		b.wire = append(b.wire, wire...)
	}
	b.count += len(events)
	b.seq = seq
	return nil
}

// addFrame is add for Frames: the item's frame, joined to the batch's
// last run when it follows it in the feed's arena.
func (b *batcher) addFrame(seq int64, events []*v1.RoomLogEvent, wire [][]byte, it *pushItem) error {
	p := piece{}
	if it != nil && it.frame != nil && it.wire != nil {
		p = piece{a: it.arena, to: it.from + len(it.frame), b: it.frame}
	} else {
		if wire == nil {
			wire = encodeEvents(events)
		}
		p.b = frameOf(wire)
	}
	if !b.batch {
		return b.emit(Message{}, Frames{RoomSeq: seq, Events: [][]byte{p.b}, Count: len(events)})
	}
	if b.count > 0 && b.count+len(events) > MaxBatchEvents {
		if err := b.flush(); err != nil {
			return err
		}
	}
	if n := len(b.pieces); n > 0 && p.a != nil && b.pieces[n-1].a == p.a && b.pieces[n-1].to == p.to-len(p.b) {
		// Written right after the last run: the run's slice reaches
		// into it (its capacity is the arena's).
		last := &b.pieces[n-1]
		last.b = last.b[:len(last.b)+len(p.b)]
		last.to = p.to
	} else {
		b.pieces = append(b.pieces, p)
	}
	b.count += len(events)
	b.seq = seq
	return nil
}

// groups adds events (in room_seq order, wire their encodings or nil)
// after last, one room_seq at a time.
func (b *batcher) groups(events []*v1.RoomLogEvent, wire [][]byte, last int64) error {
	if len(wire) != len(events) {
		wire = nil
	}
	for i := 0; i < len(events); {
		j := i + 1
		for j < len(events) && events[j].RoomSeq == events[i].RoomSeq {
			j++
		}
		if seq := events[i].RoomSeq; seq > last {
			var w [][]byte
			if wire != nil {
				w = wire[i:j:j]
			}
			if err := b.add(seq, events[i:j:j], w, nil); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// flush sends what the batcher holds. The message keeps its arrays: the
// next batch starts new ones.
func (b *batcher) flush() error {
	if b.count == 0 {
		return nil
	}
	if b.sendFrames != nil {
		fr := Frames{RoomSeq: b.seq, Events: make([][]byte, len(b.pieces)), Count: b.count}
		for i, p := range b.pieces {
			// Capped: the run's capacity reaches into the arena.
			fr.Events[i] = p.b[:len(p.b):len(p.b)]
		}
		b.pieces, b.count = b.pieces[:0], 0
		return b.emit(Message{}, fr)
	}
	m := Message{Reply: &v1.WatchRoomReply{RoomSeq: b.seq, Events: b.events}}
	if b.encoded {
		m.Wire = b.wire
	}
	b.events, b.wire, b.count = nil, nil, 0
	return b.emit(m, Frames{})
}

// join adds a watcher to the room's feed on this node, starting the feed
// (and its subscription at the owner) if it has none. It answers the
// head the watcher must catch up to, and inLog when its place is in the
// feed's log, at the first item after after (the log reaches back to
// after: the watcher reads from it what it missed).
func (w *Watcher) join(ctx context.Context, identity string, after int64) (f *feed, s *sub, head int64, inLog bool, err error) {
	w.mu.Lock()
	w.defaults()
	if w.closed {
		w.mu.Unlock()
		return nil, nil, 0, false, &WatchEndedError{Reason: EndDraining}
	}
	if w.feeds == nil {
		w.feeds = map[string]*feed{}
	}
	f = w.feeds[identity]
	fresh := f == nil
	if fresh {
		f = &feed{w: w, identity: identity, subs: map[*sub]struct{}{}, stopTick: make(chan struct{}), ready: make(chan struct{})}
		w.feeds[identity] = f
	}
	s = &sub{wake: make(chan struct{}, 1), urge: make(chan struct{}, 1), end: make(chan struct{})}
	// Registered before the catch-up read: every push from now on reaches
	// s, so the read and the pushes overlap and nothing falls between.
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.watchers.Store(int64(len(f.subs)))
	if l := f.log.Load(); l != nil {
		s.next.Store(l.end())
		// The items after after: a head item may stand out of order
		// (check), so the run of them at the end.
		i := len(l.items)
		for i > 0 && l.items[i-1].seq > after {
			i--
		}
		if i < len(l.items) && (i > 0 || l.items[0].seq == after+1) {
			s.next.Store(l.first + uint64(i))
			inLog = true
		}
	}
	f.mu.Unlock()
	w.mu.Unlock()
	if fresh {
		f.startErr = f.start(ctx)
		close(f.ready)
	}
	select {
	case <-f.ready:
	case <-ctx.Done():
		f.leave(s)
		return nil, nil, 0, false, ctx.Err()
	}
	if f.startErr != nil {
		f.finish(EndLost)
		return nil, nil, 0, false, f.startErr
	}
	// A feed that ended meanwhile has ended s too, with its reason.
	f.mu.Lock()
	head = f.head
	f.mu.Unlock()
	return f, s, head, inLog, nil
}

// start spawns the feed's actor and subscribes it at the room's owner.
func (f *feed) start(ctx context.Context) error {
	sys := f.w.Client.Cluster.ActorSystem
	f.pid = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &feedActor{f: f} }))
	ack, err := f.w.Client.subscribe(ctx, f.identity, f.pid)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.head = max(f.head, ack.HeadSeq)
	f.mu.Unlock()
	sys.Root.Send(f.pid, &watchGrain{pid: actor.NewPID(ack.GrainAddress, ack.GrainId), activation: ack.Activation})
	go f.check(ack.Activation)
	return nil
}

// check asks the owner every CheckInterval for the activation and head:
// another activation (or none answering) ends the feed; a head past the
// pushes is handed to the watchers, who fill it from the log.
func (f *feed) check(activation string) {
	t := time.NewTicker(f.w.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stopTick:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), f.w.CheckInterval)
		ack, err := f.w.Client.subscribe(ctx, f.identity, f.pid)
		cancel()
		switch {
		case err != nil:
			f.finish(EndLost)
			return
		case ack.Activation != activation:
			f.finish(EndMoved)
			return
		}
		f.fanout(&pushItem{seq: ack.HeadSeq})
	}
}

// maxHeldBuffers: the feed's log holds a watcher's place up to this many
// Buffers behind (a watcher not in a send: the node's own delay); past
// it the log lets the place go, and the watcher reads what it missed from
// the room's log. It bounds the log's memory, ~16k commits at the default.
const maxHeldBuffers = 16

// fanout appends it to the feed's log (its events framed once for every
// watcher) and wakes every watcher without waiting. A watcher its client
// holds up is cut (Watcher); one half a buffer behind is urged out of
// its linger. Items every watcher has read (or let go) are dropped, into
// a new array once they are half the log: the old one may be read by
// watchers still.
func (f *feed) fanout(it *pushItem) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.head = max(f.head, it.seq)
	if it.wire != nil && len(it.wire) == len(it.events) {
		it.arena, it.from, it.frame = f.frame(it.wire)
	}
	l := &feedLog{}
	if old := f.log.Load(); old != nil {
		*l = *old
	}
	l.items = append(l.items, it)
	end := l.end()
	read := end // the least place of a watcher
	if keep := 2 * uint64(f.w.Buffer); end-l.first > keep {
		// The newest two buffers stay for watchers that come back (a
		// cut one resuming, a reconnect): they read them here, framed,
		// not from the room.
		read = end - keep
	} else {
		read = l.first
	}
	buffer := uint64(f.w.Buffer)
	now := clock()
	for s := range f.subs {
		next := s.next.Load()
		lag := end - min(next, end)
		if lag > buffer {
			since := s.sending.Load()
			if since != 0 && (time.Duration(now-since) >= f.w.SendStall || lag > maxHeldBuffers*buffer) {
				delete(f.subs, s)
				s.stop(EndCut)
				if f.w.Metrics != nil {
					// Counted when it happens: the stream's goroutine may be
					// stuck in its send for a while yet.
					f.w.Metrics.Cuts.Inc()
				}
				continue
			}
			if lag > maxHeldBuffers*buffer {
				continue // let go: not counted in read
			}
		}
		if 2*lag >= buffer {
			select {
			case s.urge <- struct{}{}:
			default:
			}
		}
		// A watcher reading now moves only forward, past read: what it
		// still needs stays.
		read = min(read, next)
	}
	f.watchers.Store(int64(len(f.subs)))
	if drop := int(read - l.first); drop > 0 && 2*drop >= len(l.items) {
		l.items = append([]*pushItem(nil), l.items[drop:]...)
		l.first = read
	}
	f.log.Store(l)
	for s := range f.subs {
		if !s.waiting.Load() {
			continue // it looks at the log before it waits
		}
		select {
		case s.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// measureRound adds a round's wall time (ns) to f.roundNs (an average
// that moves an eighth of the way to each sample; a round that waited on
// its client counts maxRoundSample at most: that wait is no work).
func (f *feed) measureRound(ns int64) {
	ns = min(ns, int64(maxRoundSample))
	old := f.roundNs.Load()
	f.roundNs.Store(old + (ns-old)/8)
}

// take returns the items s has not read (shared: never changed) and moves
// its place past them. Without the feed's lock. A place the log let go
// (fanout) gets the log's items from its first: the watcher fills what
// lies between from the room's log (deliver).
func (f *feed) take(s *sub) []*pushItem {
	l := f.log.Load()
	if l == nil {
		return nil
	}
	items := l.items[min(max(s.next.Load(), l.first), l.end())-l.first:]
	s.next.Store(l.end())
	return items[:len(items):len(items)]
}

// finish ends every watcher of the feed and the feed itself.
func (f *feed) finish(why string) {
	f.w.mu.Lock()
	if f.w.feeds[f.identity] == f {
		delete(f.w.feeds, f.identity)
	}
	f.w.mu.Unlock()
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		return
	}
	f.done = true
	subs := f.subs
	f.subs = map[*sub]struct{}{}
	f.watchers.Store(0)
	f.mu.Unlock()
	for s := range subs {
		s.stop(why)
	}
	close(f.stopTick)
	if f.pid != nil {
		f.w.Client.Cluster.ActorSystem.Root.Stop(f.pid)
	}
}

// leave removes a watcher; the last one out stops the feed.
func (f *feed) leave(s *sub) {
	f.mu.Lock()
	delete(f.subs, s)
	f.watchers.Store(int64(len(f.subs)))
	empty := len(f.subs) == 0 && !f.done
	f.mu.Unlock()
	if !empty {
		return
	}
	f.w.mu.Lock()
	f.mu.Lock()
	// A watcher may have joined between the two locks.
	empty = len(f.subs) == 0
	f.mu.Unlock()
	f.w.mu.Unlock()
	if empty {
		f.finish(EndMoved)
	}
}

// Close ends every stream of the node (drain): each with its resume seq.
func (w *Watcher) Close() {
	w.mu.Lock()
	w.closed = true
	feeds := make([]*feed, 0, len(w.feeds))
	for _, f := range w.feeds {
		feeds = append(feeds, f)
	}
	w.mu.Unlock()
	for _, f := range feeds {
		f.finish(EndDraining)
	}
}

type watchGrain struct {
	pid        *actor.PID
	activation string
}

// feedActor receives the room's pushes for a feed.
type feedActor struct {
	f          *feed
	activation string
}

func (a *feedActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *watchGrain:
		a.activation = m.activation
		ctx.Watch(m.pid)
	case *localPush:
		a.f.fanout(&pushItem{seq: m.RoomSeq, events: m.Events, wire: m.wire})
	case *v1.RoomWatchPush:
		// From another node: encoded here, once for every watcher.
		a.f.fanout(&pushItem{seq: m.RoomSeq, events: m.Events, wire: encodeEvents(m.Events)})
	case *v1.RoomWatchEnd:
		if a.activation == "" || m.Activation == a.activation {
			a.f.finish(EndMoved)
		}
	case *actor.Terminated:
		// The grain stopped, or its node is gone.
		a.f.finish(EndMoved)
	}
}
