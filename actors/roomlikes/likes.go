package roomlikes

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
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
		return &observer{cfg: &c, room: a.Room, root: a.Root}
	}
}

// observer is one activation's likes: its open window and the index of
// its receipts, made on its first like (a room nobody likes keeps two
// words more). Every call is on the room's goroutine.
type observer struct {
	cfg  *Config
	room roomgrain.Room
	root *actor.RootContext
	lr   *likeRoom
}

// likeRoom is a liked room's open window and index.
type likeRoom struct {
	batch *likeBatch
	idx   likeIndex
}

// likeBatch is a room's open window: its likes, decided as they came
// (room.LikeWindow), and whom to answer.
type likeBatch struct {
	w       *room.LikeWindow
	answers []likeAnswer
	timer   *time.Timer
}

// likeAnswer is a like waiting for its window: who sent it, whose it is
// (the window may refuse a user's likes when it ends) and whether it is
// a retry of a like counted in the same window (answered as duplicate).
type likeAnswer struct {
	to    *actor.PID
	user  string
	retry bool
}

// likesDue: the window b's time is up (sent by its timer).
type likesDue struct{ b *likeBatch }

// Receive takes the room's LikeRoom commands and its windows' timers.
func (o *observer) Receive(ctx actor.Context) bool {
	switch m := ctx.Message().(type) {
	case *v1.RoomCommand:
		if _, ok := m.GetCommand().(*v1.RoomCommand_LikeRoom); !ok {
			return false
		}
		o.like(ctx, m)
	case *likesDue:
		if o.lr != nil && o.lr.batch == m.b {
			o.flush(ctx)
		}
	default:
		return false
	}
	return true
}

// Check refuses a command whose command_id named a like: an id names one
// request.
func (o *observer) Check(cmd room.Command) error {
	if _, ok := o.refOf(cmd.CommandID); ok {
		return fmt.Errorf("%w: command_id %q was already used for a LikeRoom, this is a %s", errclass.Exists, cmd.CommandID, cmd.Type)
	}
	return nil
}

// Stopping writes the open window while the room can still commit, so
// its likes are answered (passivation, rebalance, shutdown).
func (o *observer) Stopping(ctx actor.Context) { o.flush(ctx) }

// Stopped answers what is left of the window (a restart) unavailable:
// nothing of it was counted, and its retries will be.
func (o *observer) Stopped() {
	if o.lr == nil || o.lr.batch == nil {
		return
	}
	b := o.take()
	res := &v1.RoomResponse{Error: roomgrain.WireError(fmt.Errorf("%w: the room restarted; retry the like", errclass.Unavailable))}
	go answer(o.root, b.answers, func(likeAnswer) *v1.RoomResponse { return res })
}

func (*observer) Loaded()                              {}
func (*observer) Passed(room.Command)                  {}
func (*observer) Applying([]room.Event)                {}
func (*observer) Committed(room.Command, []room.Event) {}
func (*observer) Tick()                                {}
func (*observer) Passivating()                         {}

// take closes the room's window: it returns it (nil: none) and stops its
// timer.
func (o *observer) take() *likeBatch {
	if o.lr == nil || o.lr.batch == nil {
		return nil
	}
	b := o.lr.batch
	o.lr.batch = nil
	b.timer.Stop()
	return b
}

// refOf is the like a command_id named in the room, counted or in the
// open window; ok false: none.
func (o *observer) refOf(commandID string) (ref room.LikeRef, ok bool) {
	receipts, _ := receiptsOf(o.room.State())
	if receipts == nil && (o.lr == nil || o.lr.batch == nil) {
		return ref, false // no likes: no hash
	}
	return o.refOfID(room.LikeID(commandID))
}

// refOfID is refOf of the command_id whose LikeID is id.
func (o *observer) refOfID(id string) (ref room.LikeRef, ok bool) {
	s := o.room.State()
	receipts, _ := receiptsOf(s)
	if o.lr != nil && o.lr.batch != nil {
		if ref, ok = o.lr.batch.w.Ref(id); ok {
			return ref, true
		}
	}
	if receipts == nil {
		return ref, false
	}
	if o.lr == nil {
		o.lr = &likeRoom{}
	}
	return o.lr.idx.lookup(s, id)
}

// like takes a LikeRoom: refused now if the room's rules refuse it,
// answered now if it is a retry of a like counted before, else added to
// the room's window.
func (o *observer) like(ctx actor.Context, rc *v1.RoomCommand) {
	refuse := func(err error) { ctx.Respond(&v1.RoomResponse{Error: roomgrain.WireError(err)}) }
	r := o.room
	if _, err := r.ReadyToWrite(ctx); err != nil {
		refuse(err)
		return
	}
	cmd, ok := room.CommandFromProto(rc, r.Now().UnixMilli())
	if !ok {
		refuse(errclass.Invalidf("empty command"))
		return
	}
	if k := r.Key(); cmd.AppCode != k.AppCode || cmd.RoomID != k.RoomID {
		refuse(errclass.Invalidf("command for %s/%s sent to room %s", cmd.AppCode, cmd.RoomID, k))
		return
	}
	s := r.State()
	if !s.Exists {
		refuse(room.ErrRoomNotFound)
		ctx.Poison(ctx.Self())
		return
	}
	id := room.LikeID(cmd.CommandID) // once: the hash is most of a like's cost
	if ref, ok := o.refOfID(id); ok {
		// Its id named a like: this one again (a retry, decided by the
		// window), or another user's or count (refused).
		if err := room.LikeConflict(cmd, ref); err != nil {
			refuse(err)
			return
		}
	} else if r.RecentlyUsed(cmd) {
		refuse(fmt.Errorf("%w: command_id %q was already used for another command", errclass.Exists, cmd.CommandID))
		return
	}
	// The rules now (room.LikeWindow.Add), so what they refuse is
	// refused at once, with nothing written; the window's end checks its
	// likers again (room.LikeWindow.Close).
	if o.lr == nil {
		o.lr = &likeRoom{}
	}
	b := o.lr.batch
	opened := b == nil
	if opened {
		b = &likeBatch{w: room.NewLikeWindow()}
	}
	out, inWindow := b.w.AddAs(*s, cmd, id)
	switch {
	case out.Err != nil:
		refuse(r.Explain(cmd, out.Err))
		return
	case out.Recorded && !inWindow:
		ctx.Respond(&v1.RoomResponse{Reply: duplicate(s)})
		return
	}
	// Counted in the window, or a retry of a like it counts: answered
	// with the window.
	if opened {
		self, root := ctx.Self(), ctx.ActorSystem().Root
		b.timer = time.AfterFunc(o.cfg.Window, func() { root.Send(self, &likesDue{b: b}) })
		o.lr.batch = b
	}
	b.answers = append(b.answers, likeAnswer{to: ctx.Sender(), user: cmd.UserID, retry: out.Recorded})
	if len(b.answers) >= maxLikeBatch {
		o.flush(ctx)
	}
}

// flush ends the room's window: closes it (room.LikeWindow.Close: its
// likers, not its likes, so the commands behind it wait well under a
// millisecond), appends its one row and answers each like.
func (o *observer) flush(ctx actor.Context) {
	b := o.take()
	if b == nil || len(b.answers) == 0 {
		return
	}
	// The answers go out from a goroutine of their own once decided: a
	// window's thousands of sends would otherwise hold the room's
	// mailbox (the joins and gifts behind it) for milliseconds.
	var counted, dup, failed *v1.RoomResponse
	var refused map[string]*v1.RoomResponse
	defer func() {
		go answer(o.root, b.answers, func(a likeAnswer) *v1.RoomResponse {
			if failed != nil {
				return failed
			}
			if res, ok := refused[a.user]; ok {
				return res
			}
			if a.retry {
				return dup
			}
			return counted
		})
	}()
	r := o.room
	reloaded, err := r.ReadyToWrite(ctx)
	if err == nil && reloaded {
		// An append whose outcome was unknown may have counted likes the
		// window took for new. Nothing of it is counted; the retries are
		// decided against the reloaded receipts.
		err = fmt.Errorf("%w: the room was reloaded; retry the like", errclass.Unavailable)
	}
	if err != nil {
		failed = &v1.RoomResponse{Error: roomgrain.WireError(err)}
		return
	}
	s, now, k := r.State(), r.Now().UnixMilli(), r.Key()
	events, refusals := b.w.Close(*s, now)
	for u, err := range refusals {
		if refused == nil {
			refused = make(map[string]*v1.RoomResponse, len(refusals))
		}
		like := room.Command{Type: room.CmdLikeRoom, AppCode: k.AppCode, RoomID: k.RoomID, UserID: u, NowMs: now}
		refused[u] = &v1.RoomResponse{Error: roomgrain.WireError(r.Explain(like, err))}
	}
	dup = &v1.RoomResponse{Reply: duplicate(s)}
	if len(events) == 0 {
		return
	}
	batch := room.Command{Type: room.CmdLikeRoom, CommandID: likesID(s.Seq + 1), AppCode: k.AppCode, RoomID: k.RoomID, NowMs: now}
	reply, err := r.CommitReply(ctx, batch, events)
	if err != nil {
		// Nothing of the window is counted (or, after an append whose
		// answer was lost, the reload finds its receipts and the retries
		// are answered as duplicates).
		failed = &v1.RoomResponse{Error: roomgrain.WireError(err)}
		return
	}
	o.lr.idx.stored(b.w.Refs(), s)
	o.cfg.Metrics.window(events[0].(room.RoomLiked).Count)
	// The receipts are the room's own: a like's reply carries the
	// RoomLiked alone.
	counted = &v1.RoomResponse{Reply: &v1.CommandReply{RoomSeq: reply.RoomSeq, EventIds: reply.EventIds[:1], Events: reply.Events[:1], Room: reply.Room}}
	dup = &v1.RoomResponse{Reply: duplicate(s)}
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
// another command. Each window's row replaces the receipts map, and
// building the index again on the room's goroutine held its mailbox for
// up to a millisecond a window: it is built on a goroutine of its own
// from the map (never changed in place), while the windows stored since
// the map it was built from are looked up by their own likes. A hit is
// checked against the receipts the room holds now (forgotten receipts
// stay in the index until its next build).
type likeIndex struct {
	mu       sync.Mutex // the build hands its index over under it
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

// stored notes a window whose row is applied.
func (x *likeIndex) stored(refs map[string]room.LikeRef, s *room.State) {
	_, of := receiptsOf(s)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.since = append(x.since, storedWindow{refs: refs, of: of})
}

// lookup finds id among s's receipts.
func (x *likeIndex) lookup(s *room.State, id string) (room.LikeRef, bool) {
	receipts, cur := receiptsOf(s)
	if receipts == nil {
		return room.LikeRef{}, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
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
	if !ok || !room.LikeHeld(*s, ref) {
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
