package roomlikes

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// maxLikeBatch ends a window early: a bigger one would make a log row of
// megabytes (each like's receipt is ~20 bytes of it).
const maxLikeBatch = 10_000

// inbox is how many messages a room's likes goroutine holds before the
// room's goroutine waits to hand it more (a burst of likes).
const inbox = 4096

// Config is what a node's likes are made of.
type Config struct {
	// Window is room.like_window (configs.DefaultLikeWindow when zero).
	Window time.Duration
	// Metrics: nil means none.
	Metrics *Metrics
}

// Observe makes the observer of the node's rooms that gathers their
// likes; the node's wiring lists it in roomgrain.Deps.Observers.
func Observe(c Config) roomgrain.NewObserver {
	if c.Window <= 0 {
		c.Window = configs.DefaultLikeWindow
	}
	return func(a roomgrain.Activation) roomgrain.Observer {
		return &observer{cfg: &c, room: a.Room, root: a.Root, self: a.Self, sys: a.Root.ActorSystem()}
	}
}

// observer is one activation's likes. Its methods run on the room's
// goroutine; a liked room's likes are decided on a goroutine of its own
// (liker), and only a window's tally comes back to the room, once per
// window. A room nobody likes keeps a few words more.
type observer struct {
	cfg  *Config
	room roomgrain.Room
	root *actor.RootContext
	self *actor.PID
	sys  *actor.ActorSystem
	idx  *likeIndex // made on the first like or the first look at receipts
	lk   *liker     // started on the first like
	enc  *receiptsEncoder
	done bool // Stopped
}

// liker is a room's likes goroutine: it takes each like the room let
// through (the user may like here now), looks its command_id up among
// the open window, the windows being stored and the room's receipts,
// and puts it in the open window (room.LikeWindow.Put). When the window
// ends it sends the room its tally (likesDue); the room closes it
// against its state, commits one row and hands the outcome back
// (stored), and the liker answers the window's likes.
type liker struct {
	in   chan any
	quit chan struct{} // closed when run returns
	root *actor.RootContext
	room *actor.PID
	r    roomgrain.Room // Key, Now and Holds only: read on other goroutines
	win  time.Duration
	idx  *likeIndex
	seed maphash.Seed

	// mu guards open and closing (the room's Check reads them), recent
	// and checking.
	mu      sync.Mutex
	open    *window
	closing []*window // ended, not yet stored or failed, oldest first
	// recent is the room's recent command ids (hashed), so that an id a
	// command used lately is refused for a like (by the room: a like
	// from the front under one goes there); checking is the id of the
	// command the room is deciding now (between its Check and its
	// commit it is in neither).
	recent   recentIDs
	checking uint64

	// viewMu guards view: the fronts read it, the room writes it, and
	// holds it while a commit changes its state in place (Applying to
	// Committed). A read-write lock: the likes of thousands of callers
	// read it at once, and wait for nothing but a commit.
	viewMu sync.RWMutex
	view   view
	// closeFront ends the front (Stopping, Stopped).
	closeFront func()
}

// view is what the front decides a like against (front.go): the room as
// its last commit or load left it, published by the room.
type view struct {
	// room holds what room.CheckLiker reads: Exists, Status, Members,
	// Bans. The maps are the room's own, changed in place only while
	// the room holds viewMu.
	room  room.State
	epoch int64 // the lease epoch the room's state was loaded under
	// takes: the front decides likes. Off while the room would load its
	// state before writing (an append's outcome unknown) and after a
	// window failed, until the room publishes again: those likes go to
	// the room, which loads first.
	takes  bool
	closed bool // the room stops: nothing more is taken
}

// window is one window of a room's likes and whom to answer.
type window struct {
	lk      *liker
	w       *room.LikeWindow
	answers []likeAnswer
	timer   *time.Timer
	tally   *room.LikeTally // made when it ends
	// handled is the room's: the window was closed against it (its
	// likesDue, or the activation's Stopping).
	handled bool
	// stale is the room's: the room loaded its state again since the
	// window's likes were decided (Loaded), so its likes, decided against
	// receipts the reload replaced, are answered unavailable, not
	// stored.
	stale bool
}

// likeAnswer is a like waiting for its window: who sent it, whose it is
// (the window may refuse a user's likes when it ends) and whether it is
// a retry of a like counted in the same window (answered as duplicate).
type likeAnswer struct {
	to    *actor.PID
	user  string
	retry bool
}

// Messages of the likes goroutine.
type (
	likeIn struct { // a like the room (or the front) let through
		to    *actor.PID
		rc    *v1.RoomCommand
		nowMs int64
		// front: the front let it through; it goes to the room if its
		// id is a recent command's.
		front bool
	}
	windowDue struct{ w *window } // its timer
	stored    struct {            // a window's outcome, from the room
		w                    *window
		counted, dup, failed *v1.RoomResponse
		refused              map[string]*v1.RoomResponse
	}
	handOver struct{ reply chan []*window } // the room stops: every window not yet stored
	stop     struct{}
)

// Messages to the room.
type (
	likesDue   struct{ w *window }     // close w against the room
	likeRepeat struct{ to *actor.PID } // answer a retry of a stored like
)

// Receive takes the room's LikeRoom commands and its windows.
func (o *observer) Receive(ctx actor.Context) bool {
	switch m := ctx.Message().(type) {
	case *v1.RoomCommand:
		if _, ok := m.GetCommand().(*v1.RoomCommand_LikeRoom); !ok {
			return false
		}
		o.like(ctx, m)
	case *likesDue:
		if o.lk != nil && m.w.lk == o.lk && !o.done {
			o.store(ctx, m.w)
		}
	case *likeRepeat:
		ctx.Send(m.to, &v1.RoomResponse{Reply: duplicate(o.room.State())})
	default:
		return false
	}
	return true
}

// Check refuses a command whose command_id named a like: an id names one
// request.
func (o *observer) Check(cmd room.Command) error {
	if o.idx == nil && o.lk == nil {
		if rs, _ := receiptsOf(o.room.State()); rs == nil {
			return nil // no likes: no hash
		}
	}
	if _, ok := o.named(cmd.CommandID); ok {
		return fmt.Errorf("%w: command_id %q was already used for a LikeRoom, this is a %s", errclass.Exists, cmd.CommandID, cmd.Type)
	}
	return nil
}

// named is the like a command_id named, in a window not yet stored or
// among the room's receipts; ok false: none. From now until its commit
// the likes goroutine hands the room any like of the front under the
// id (checking): the command is in neither the windows nor the room's
// recent ids.
func (o *observer) named(commandID string) (ref room.LikeRef, ok bool) {
	id := room.LikeID(commandID)
	if o.lk != nil {
		o.lk.mu.Lock()
		o.lk.checking = o.lk.hash(commandID)
		ref, _, ok = o.lk.inWindows(id)
		o.lk.mu.Unlock()
		if ok {
			return ref, true
		}
	}
	return o.index().lookup(id)
}

// index is the room's index of its like receipts, made on first use.
func (o *observer) index() *likeIndex {
	if o.idx == nil {
		o.idx = &likeIndex{}
		o.idx.reset(o.room.State())
	}
	return o.idx
}

// Loaded: the room's state is the store's now. The windows not yet
// stored had their likes decided against the receipts the load replaced
// (a window whose append's outcome was unknown may be among the new
// ones): they are answered unavailable, and their retries decided
// against the room as loaded.
func (o *observer) Loaded() {
	if o.lk != nil {
		o.lk.mu.Lock()
		defer o.lk.mu.Unlock()
		for _, w := range o.lk.closing {
			w.stale = true
		}
		if o.lk.open != nil {
			o.lk.open.stale = true
		}
		o.lk.recent.reset(o.lk, o.room.RecentIDs())
		o.lk.viewMu.Lock()
		o.publish()
		o.lk.viewMu.Unlock()
	}
	if o.idx != nil {
		o.idx.reset(o.room.State())
	}
	if o.enc != nil {
		o.enc.want(o.room.State().LikeReceipts())
	}
}

// Applying: the room's state changes in place; the front waits.
func (o *observer) Applying([]room.Event) {
	if o.lk != nil {
		o.lk.viewMu.Lock()
	}
}

// Committed: the front decides against the room after the command, and
// its command_id is a recent one.
func (o *observer) Committed(cmd room.Command, _ []room.Event) {
	if o.lk != nil {
		o.publish()
		o.lk.viewMu.Unlock()
		o.lk.mu.Lock()
		o.lk.recent.add(o.lk, cmd.CommandID)
		o.lk.mu.Unlock()
	}
}

// publish hands the front the room as it is now. On the room's
// goroutine, under lk.viewMu.
func (o *observer) publish() {
	s, v := o.room.State(), &o.lk.view
	v.room = room.State{Exists: s.Exists, Status: s.Status, Members: s.Members, Bans: s.Bans}
	v.epoch, v.takes = o.room.Epoch(), o.room.Writable()
}

// Stopping writes the windows not yet stored while the room can still
// commit, so their likes are answered (passivation, rebalance,
// shutdown).
func (o *observer) Stopping(ctx actor.Context) {
	if o.lk == nil || o.done {
		return
	}
	o.lk.closeFront()
	reply := make(chan []*window, 1)
	o.lk.in <- handOver{reply: reply}
	for _, w := range <-reply {
		if !w.handled {
			o.store(ctx, w)
		}
	}
}

// Stopped ends the likes goroutine: what it still holds is answered
// unavailable (nothing of it was counted, and its retries will be).
func (o *observer) Stopped() {
	if o.lk != nil && !o.done {
		o.lk.closeFront()
		o.lk.in <- stop{}
	}
	o.done = true
}

func (*observer) Passed(room.Command) {}
func (*observer) Tick()               {}
func (*observer) Passivating()        {}

// like lets a LikeRoom through to the likes goroutine if the room takes
// likes from its user now, and refuses it at once if not. Only map
// lookups here: the rest of the like (its command_id's hash and
// look-up, the window) is the likes goroutine's.
func (o *observer) like(ctx actor.Context, rc *v1.RoomCommand) {
	r := o.room
	refuse := func(err error) { ctx.Respond(&v1.RoomResponse{Error: roomgrain.WireError(err)}) }
	if o.done {
		refuse(fmt.Errorf("%w: the room is stopping; retry the like", errclass.Unavailable))
		return
	}
	if _, err := r.ReadyToWrite(ctx); err != nil {
		refuse(err)
		return
	}
	s := r.State()
	if !s.Exists {
		refuse(room.ErrRoomNotFound)
		ctx.Poison(ctx.Self())
		return
	}
	l, now := rc.GetLikeRoom(), r.Now().UnixMilli()
	if k := r.Key(); l.GetAppCode() != k.AppCode || l.GetRoomId() != k.RoomID {
		refuse(errclass.Invalidf("command for %s/%s sent to room %s", l.GetAppCode(), l.GetRoomId(), k))
		return
	}
	if err := room.CheckLiker(*s, l.GetUserId(), now); err != nil {
		// Refused either way; an id that named another like says so
		// first, as it does for a member.
		cmd, _ := room.CommandFromProto(rc, now)
		if ref, ok := o.named(cmd.CommandID); ok {
			if cerr := room.LikeConflict(cmd, ref); cerr != nil {
				err = cerr
			}
		}
		refuse(r.Explain(cmd, err))
		return
	}
	if r.RecentID(l.GetCommandId()) {
		if cmd, _ := room.CommandFromProto(rc, now); r.RecentlyUsed(cmd) {
			refuse(fmt.Errorf("%w: command_id %q was already used for another command", errclass.Exists, cmd.CommandID))
			return
		}
	}
	if o.lk == nil {
		o.start()
	}
	o.lk.in <- likeIn{to: ctx.Sender(), rc: rc, nowMs: now}
}

// start starts the room's likes goroutine and opens its front
// (front.go): from now on this node's likes of the room are decided
// there, and the room publishes itself to it at each commit.
func (o *observer) start() {
	lk := &liker{
		in: make(chan any, inbox), quit: make(chan struct{}),
		root: o.root, room: o.self, r: o.room, win: o.cfg.Window, idx: o.index(), seed: maphash.MakeSeed(),
	}
	lk.recent.reset(lk, o.room.RecentIDs())
	o.lk, o.enc = lk, &receiptsEncoder{}
	o.publish()
	o.enc.want(o.room.State().LikeReceipts())
	var once sync.Once
	closeFront := roomgrain.OpenFront(o.sys, o.self, &front{lk: lk})
	lk.closeFront = func() {
		once.Do(func() {
			lk.viewMu.Lock()
			lk.view.closed = true
			lk.viewMu.Unlock()
			closeFront()
		})
	}
	go lk.run()
}

// store closes window w against the room (room.LikeTally.Close: its
// likers, not its likes), appends its one row and hands the outcome to
// the likes goroutine, which answers the window's likes.
func (o *observer) store(ctx actor.Context, w *window) {
	w.handled = true
	res := stored{w: w}
	defer func() {
		if res.failed != nil {
			// The room may load before it writes again: likes go to it
			// (it loads first) until it publishes again.
			o.lk.viewMu.Lock()
			o.lk.view.takes = false
			o.lk.viewMu.Unlock()
		}
		o.lk.in <- res
	}()
	r := o.room
	reloaded, err := r.ReadyToWrite(ctx)
	if err == nil && (reloaded || w.stale) {
		// An append whose outcome was unknown may have counted likes the
		// window took for new. Nothing of it is counted; the retries are
		// decided against the reloaded receipts.
		err = fmt.Errorf("%w: the room was reloaded; retry the like", errclass.Unavailable)
	}
	if err != nil {
		res.failed = &v1.RoomResponse{Error: roomgrain.WireError(err)}
		return
	}
	s, now, k := r.State(), r.Now().UnixMilli(), r.Key()
	events, refusals := w.tally.Close(*s, now)
	for u, err := range refusals {
		if res.refused == nil {
			res.refused = make(map[string]*v1.RoomResponse, len(refusals))
		}
		like := room.Command{Type: room.CmdLikeRoom, AppCode: k.AppCode, RoomID: k.RoomID, UserID: u, NowMs: now}
		res.refused[u] = &v1.RoomResponse{Error: roomgrain.WireError(r.Explain(like, err))}
	}
	if len(events) == 0 {
		res.dup = &v1.RoomResponse{Reply: duplicate(s)}
		return
	}
	batch := room.Command{Type: room.CmdLikeRoom, CommandID: likesID(s.Seq + 1), AppCode: k.AppCode, RoomID: k.RoomID, NowMs: now}
	reply, err := r.CommitReply(ctx, batch, events)
	if err != nil {
		// Nothing of the window is counted (or, after an append whose
		// answer was lost, the reload finds its receipts and the retries
		// are answered as duplicates).
		res.failed = &v1.RoomResponse{Error: roomgrain.WireError(err)}
		return
	}
	// Its ids are named from now on, before the likes goroutine hears of
	// it (a command checked meanwhile finds them here or in the window).
	o.idx.stored(w.w.Refs(), s)
	o.enc.want(s.LikeReceipts())
	o.cfg.Metrics.window(events[0].(room.RoomLiked).Count)
	// The receipts are the room's own: a like's reply carries the
	// RoomLiked alone.
	res.counted = &v1.RoomResponse{Reply: &v1.CommandReply{RoomSeq: reply.RoomSeq, EventIds: reply.EventIds[:1], Events: reply.Events[:1], Room: reply.Room}}
	res.dup = &v1.RoomResponse{Reply: duplicate(s)}
}

// run is the likes goroutine.
func (lk *liker) run() {
	defer close(lk.quit)
	for m := range lk.in {
		switch m := m.(type) {
		case likeIn:
			lk.like(m)
		case windowDue:
			lk.mu.Lock()
			if lk.open == m.w {
				lk.end()
			}
			lk.mu.Unlock()
		case stored:
			lk.mu.Lock()
			lk.closing = slices.DeleteFunc(lk.closing, func(w *window) bool { return w == m.w })
			answers := m.w.answers // none added once it left closing
			lk.mu.Unlock()
			go answer(lk.root, answers, func(a likeAnswer) *v1.RoomResponse {
				if m.failed != nil {
					return m.failed
				}
				if res, ok := m.refused[a.user]; ok {
					return res
				}
				if a.retry {
					return m.dup
				}
				return m.counted
			})
		case handOver:
			lk.mu.Lock()
			if lk.open != nil {
				lk.open.timer.Stop()
				lk.closing = append(lk.closing, lk.open)
				lk.open.tally = tally(lk.open.w)
				lk.open = nil
			}
			m.reply <- slices.Clone(lk.closing)
			lk.mu.Unlock()
		case stop:
			lk.mu.Lock()
			pending := lk.closing
			if lk.open != nil {
				lk.open.timer.Stop()
				pending = append(pending, lk.open)
			}
			lk.open, lk.closing = nil, nil
			answers := make([][]likeAnswer, len(pending))
			for i, w := range pending {
				answers[i] = w.answers
			}
			lk.mu.Unlock()
			res := &v1.RoomResponse{Error: roomgrain.WireError(fmt.Errorf("%w: the room restarted; retry the like", errclass.Unavailable))}
			for _, a := range answers {
				go answer(lk.root, a, func(likeAnswer) *v1.RoomResponse { return res })
			}
			// Likes the front handed over before it closed.
			for {
				select {
				case m := <-lk.in:
					if l, ok := m.(likeIn); ok {
						lk.root.Send(l.to, res)
					}
				default:
					return
				}
			}
		}
	}
}

// like decides one like the room or the front let through.
func (lk *liker) like(m likeIn) {
	cmd, ok := room.CommandFromProto(m.rc, m.nowMs)
	if !ok {
		lk.root.Send(m.to, &v1.RoomResponse{Error: roomgrain.WireError(errclass.Invalidf("empty command"))})
		return
	}
	id := room.LikeID(cmd.CommandID) // once: the hash is most of a like's cost
	var h uint64
	if m.front {
		h = lk.hash(cmd.CommandID)
	}
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if m.front && (h == lk.checking || lk.recent.has(h)) {
		// A command under its id may have been checked or committed since
		// the front passed it: the room decides it (with the command's
		// record at hand).
		lk.root.RequestWithCustomSender(lk.room, m.rc, m.to)
		return
	}
	lk.decide(m.to, cmd, id)
}

// decide decides a like the room (or the front) let through: refused,
// answered as a duplicate of a like stored before (the room answers:
// the reply is the room now), or added to a window (counted in the open
// one, or a retry of a like of a window not yet answered, answered with
// it). Under mu.
func (lk *liker) decide(to *actor.PID, cmd room.Command, id string) {
	refuse := func(err error) { lk.root.Send(to, &v1.RoomResponse{Error: roomgrain.WireError(err)}) }
	if ref, w, ok := lk.inWindows(id); ok {
		if err := room.LikeConflict(cmd, ref); err != nil {
			refuse(err)
			return
		}
		w.answers = append(w.answers, likeAnswer{to: to, user: cmd.UserID, retry: true})
		return
	}
	if ref, ok := lk.idx.lookup(id); ok {
		if err := room.LikeConflict(cmd, ref); err != nil {
			refuse(err)
			return
		}
		lk.root.Send(lk.room, &likeRepeat{to: to})
		return
	}
	w := lk.open
	if w == nil {
		w = &window{lk: lk, w: room.NewLikeWindow()}
	}
	out, _ := w.w.Put(cmd, id)
	if out.Err != nil {
		refuse(out.Err)
		return
	}
	if lk.open == nil {
		lk.open = w
		w.timer = time.AfterFunc(lk.win, func() {
			select {
			case lk.in <- windowDue{w: w}:
			case <-lk.quit:
			}
		})
	}
	w.answers = append(w.answers, likeAnswer{to: to, user: cmd.UserID})
	if len(w.answers) >= maxLikeBatch {
		lk.end()
	}
}

// end ends the open window: its tally goes to the room. Under mu.
func (lk *liker) end() {
	w := lk.open
	lk.open = nil
	w.timer.Stop()
	w.tally = tally(w.w)
	lk.closing = append(lk.closing, w)
	lk.root.Send(lk.room, &likesDue{w: w})
}

// tally ends w off the room's goroutine: sorted, its receipts packed.
func tally(w *room.LikeWindow) *room.LikeTally {
	t := w.Tally()
	t.Encode()
	return t
}

// inWindows is the like counted under id in a window not yet stored
// (the open one or one being stored), and that window. Under mu.
func (lk *liker) inWindows(id string) (room.LikeRef, *window, bool) {
	if lk.open != nil {
		if ref, ok := lk.open.w.Ref(id); ok {
			return ref, lk.open, true
		}
	}
	for _, w := range lk.closing {
		if ref, ok := w.w.Ref(id); ok {
			return ref, w, true
		}
	}
	return room.LikeRef{}, nil, false
}

// answer sends each like its answer.
func answer(root *actor.RootContext, answers []likeAnswer, of func(likeAnswer) *v1.RoomResponse) {
	for _, a := range answers {
		if res := of(a); a.to != nil && res != nil {
			root.Send(a.to, res)
		}
	}
}

// duplicate is the answer to a retry of a like counted before: the room
// now, marked duplicate, nothing written.
func duplicate(s *room.State) *v1.CommandReply {
	return &v1.CommandReply{RoomSeq: s.Seq, Duplicate: true, Room: room.Summary(*s)}
}

// likesID is the command_id of a window's log row: its seq, and a random
// part, so that a row another activation wrote at the same seq is never
// taken for this one (the grain looks the id up after a failed append).
func likesID(seq int64) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	return room.LikesIDPrefix + strconv.FormatInt(seq, 10) + "-" + hex.EncodeToString(r[:])
}

// likeIndex finds a command_id among the room's like receipts, so that
// an id that named one like is refused for another user's like or for
// another command. Each window's row replaces the receipts map (never
// changed in place, so it may be read on any goroutine), and the room
// hands the index each new map (stored, reset). Building the index
// again for each map would take up to a millisecond a window: it is
// built on a goroutine of its own, while the windows stored since the
// map it was built from are looked up by their own likes. A hit is
// checked against the newest receipts (forgotten receipts stay in the
// index until its next build).
type likeIndex struct {
	mu       sync.Mutex
	cur      map[string]room.LikeReceipts // the room's receipts now
	ids      map[string]room.LikeRef
	of       unsafe.Pointer // the receipts map ids was built from
	since    []storedWindow // windows stored after it, oldest first
	building bool
}

// storedWindow is a stored window's likes and the receipts map its row
// made.
type storedWindow struct {
	refs map[string]room.LikeRef
	of   unsafe.Pointer
}

func receiptsOf(s *room.State) (map[string]room.LikeReceipts, unsafe.Pointer) {
	if s.Extra == nil || s.Extra.LikeReceipts == nil {
		return nil, nil
	}
	return s.Extra.LikeReceipts, reflect.ValueOf(s.Extra.LikeReceipts).UnsafePointer()
}

// reset: the room's receipts are s's (its first look, a reload).
func (x *likeIndex) reset(s *room.State) {
	rs, _ := receiptsOf(s)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cur = rs
}

// stored notes a window whose row is applied to s.
func (x *likeIndex) stored(refs map[string]room.LikeRef, s *room.State) {
	rs, of := receiptsOf(s)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cur = rs
	x.since = append(x.since, storedWindow{refs: refs, of: of})
}

// lookup finds id among the room's receipts.
func (x *likeIndex) lookup(id string) (room.LikeRef, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	receipts := x.cur
	if receipts == nil {
		return room.LikeRef{}, false
	}
	cur := reflect.ValueOf(receipts).UnsafePointer()
	if x.of != cur && (len(x.since) == 0 || x.since[len(x.since)-1].of != cur) {
		// Receipts the index has not followed (the first look, a reload):
		// built here.
		x.ids, x.of, x.since = room.LikeIDsIn(receipts), cur, nil
	}
	ref, ok := x.ids[id]
	for i := len(x.since) - 1; i >= 0 && !ok; i-- {
		ref, ok = x.since[i].refs[id]
	}
	if len(x.since) > 0 && !x.building {
		x.building = true
		go x.build(receipts, cur)
	}
	if !ok || !room.LikeHeldIn(receipts, ref) {
		return room.LikeRef{}, false
	}
	return ref, true
}

// build indexes the receipts map of (the newest when it started).
func (x *likeIndex) build(receipts map[string]room.LikeReceipts, of unsafe.Pointer) {
	ids := room.LikeIDsIn(receipts)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.building = false
	for i, w := range x.since {
		if w.of == of {
			x.ids, x.of, x.since = ids, of, slices.Clone(x.since[i+1:])
			return
		}
	}
	// A reload replaced the receipts meanwhile: lookup builds anew.
}

// Metrics count the rooms' like windows and the likes they counted:
// windows per second is the like rows (and IM messages) a node writes,
// likes over windows how well windows gather.
type Metrics struct {
	Windows prometheus.Counter
	Likes   prometheus.Counter
}

// NewMetrics creates the instruments and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Windows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcell_room_like_windows_total",
			Help: "Like windows written: one log row and one IM message (RoomLiked) each, however many likes they hold.",
		}),
		Likes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "roomcell_room_likes_total",
			Help: "Likes counted (the sum of the windows' counts; retries counted once).",
		}),
	}
	for _, c := range []prometheus.Collector{m.Windows, m.Likes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("room likes: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) window(likes int64) {
	if m != nil {
		m.Windows.Inc()
		m.Likes.Add(float64(likes))
	}
}
