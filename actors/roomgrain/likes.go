package roomgrain

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

// Likes by group commit. A LikeRoom that passes the room's rules now is
// not answered at once: it joins the room's open window, and the grain
// goes on serving every other command. When the window ends
// (room.like_window after its first like, or sooner when it holds
// maxLikeBatch likes) the grain decides the window's likes against the
// room as it is then (room.DecideLikes), appends ONE log row (RoomLiked
// and RoomLikeReceipts, one IM message), and only then answers each like.
// So an acknowledged like is durable and counted once: a crash before
// the append answers nobody (the clients retry, nothing was counted), and
// a retry after it finds its receipt in the room's state (rebuilt by
// replay like the rest) and is answered as a duplicate.

// maxLikeBatch ends a window early: a bigger one would make a log row of
// megabytes (each like's receipt is ~20 bytes of it).
const maxLikeBatch = 10_000

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

// likeRoom is what a room activation keeps for its likes: the open
// window and the index of its receipts by LikeID.
type likeRoom struct {
	batch *likeBatch
	idx   likeIndex
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

// likeWindows holds the like part of the node's rooms (one per node, in
// Deps): the grain has no field to spare (TestGrainFitsItsSizeClass),
// and a room nobody likes pays nothing. Keyed by the activation, so a
// new activation of a room never sees an old one's.
type likeWindows struct {
	mu    sync.Mutex
	rooms map[*grain]*likeRoom
}

func (w *likeWindows) room(g *grain, create bool) *likeRoom {
	w.mu.Lock()
	defer w.mu.Unlock()
	lr := w.rooms[g]
	if lr == nil && create {
		lr = &likeRoom{}
		w.rooms[g] = lr
	}
	return lr
}

func (w *likeWindows) get(g *grain) *likeBatch {
	if lr := w.room(g, false); lr != nil {
		return lr.batch
	}
	return nil
}

// open makes b g's open window and arms its timer.
func (w *likeWindows) open(g *grain, b *likeBatch, arm func(b *likeBatch) *time.Timer) {
	lr := w.room(g, true)
	lr.batch = b
	b.timer = arm(b)
}

// take closes g's window: it returns it (nil: none) and stops its timer.
func (w *likeWindows) take(g *grain) *likeBatch {
	lr := w.room(g, false)
	if lr == nil || lr.batch == nil {
		return nil
	}
	b := lr.batch
	lr.batch = nil
	b.timer.Stop()
	return b
}

// forget drops what g kept (its activation ends).
func (w *likeWindows) forget(g *grain) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rooms, g)
}

// likeRefOf is the like a command_id named in the room, counted or in
// the open window; ok false: none.
func (g *grain) likeRefOf(commandID string) (ref room.LikeRef, ok bool) {
	receipts, _ := receiptsOf(&g.state)
	lr := g.deps.likes.room(g, false)
	if receipts == nil && (lr == nil || lr.batch == nil) {
		return ref, false // no likes: no hash
	}
	id := room.LikeID(commandID)
	if lr != nil && lr.batch != nil {
		if ref, ok = lr.batch.w.Ref(id); ok {
			return ref, true
		}
	}
	if receipts == nil {
		return ref, false
	}
	if lr == nil {
		lr = g.deps.likes.room(g, true)
	}
	return lr.idx.lookup(&g.state, id)
}

// likeIDTaken refuses a command whose command_id named a like: an id
// names one request.
func (g *grain) likeIDTaken(cmd room.Command) error {
	if _, ok := g.likeRefOf(cmd.CommandID); ok {
		return fmt.Errorf("%w: command_id %q was already used for a LikeRoom, this is a %s", errclass.Exists, cmd.CommandID, cmd.Type)
	}
	return nil
}

// likesDue: the window b's time is up (sent by its timer).
type likesDue struct{ b *likeBatch }

// likeWindow is the node's room.like_window (its default when unset, as
// in tests that build Deps by hand).
func (d *Deps) likeWindow() time.Duration {
	if d.Config.LikeWindow > 0 {
		return d.Config.LikeWindow
	}
	return 500 * time.Millisecond
}

// like takes a LikeRoom: refused now if the room's rules refuse it,
// answered now if it is a retry of a like counted before, else added to
// the room's window.
func (g *grain) like(ctx actor.Context, rc *v1.RoomCommand) {
	refuse := func(err error) { ctx.Respond(&v1.RoomResponse{Error: roomError(err)}) }
	if err := g.gate(ctx); err != nil {
		refuse(err)
		return
	}
	if err := g.ensureLoaded(); err != nil {
		refuse(err)
		return
	}
	cmd, ok := room.CommandFromProto(rc, g.deps.Clock().UnixMilli())
	if !ok {
		refuse(errclass.Invalidf("empty command"))
		return
	}
	if k := g.key(); cmd.AppCode != k.AppCode || cmd.RoomID != k.RoomID {
		refuse(errclass.Invalidf("command for %s/%s sent to room %s", cmd.AppCode, cmd.RoomID, k))
		return
	}
	if !g.state.Exists {
		refuse(room.ErrRoomNotFound)
		ctx.Poison(ctx.Self())
		return
	}
	if ref, ok := g.likeRefOf(cmd.CommandID); ok {
		// Its id named a like: this one again (a retry, decided by the
		// window), or another user's or count (refused).
		if err := room.LikeConflict(cmd, ref); err != nil {
			refuse(err)
			return
		}
	} else if g.recent.has(cmd.CommandID) {
		// An id of another command (older ones are not looked up: a
		// store read per like would cost more than the likes).
		if _, err := g.recorded(cmd); err == nil || errors.Is(err, errclass.Exists) {
			refuse(fmt.Errorf("%w: command_id %q was already used for another command", errclass.Exists, cmd.CommandID))
			return
		}
	}
	for _, o := range g.observers() {
		if err := o.Check(cmd); err != nil {
			refuse(err)
			return
		}
	}
	// The rules now (room.LikeWindow.Add), so what they refuse is
	// refused at once, with nothing written; the window's end checks its
	// likers again (room.LikeWindow.Close).
	b := g.deps.likes.get(g)
	opened := b == nil
	if opened {
		b = &likeBatch{w: room.NewLikeWindow()}
	}
	out, inWindow := b.w.Add(g.state, cmd)
	switch {
	case out.Err != nil:
		refuse(g.explain(cmd, out.Err))
		return
	case out.Recorded && !inWindow:
		ctx.Respond(&v1.RoomResponse{Reply: g.likeDuplicate()})
		return
	}
	// Counted in the window, or a retry of a like it counts: answered
	// with the window.
	if opened {
		self, sys, window := ctx.Self(), ctx.ActorSystem(), g.deps.likeWindow()
		g.deps.likes.open(g, b, func(b *likeBatch) *time.Timer {
			return time.AfterFunc(window, func() { sys.Root.Send(self, &likesDue{b: b}) })
		})
	}
	b.answers = append(b.answers, likeAnswer{to: ctx.Sender(), user: cmd.UserID, retry: out.Recorded})
	if len(b.answers) >= maxLikeBatch {
		g.flushLikes(ctx)
	}
}

// likesDue ends the window m names, if it is still the room's open one.
func (g *grain) likesDue(ctx actor.Context, m *likesDue) {
	if g.deps.likes.get(g) == m.b {
		g.flushLikes(ctx)
	}
}

// flushLikes ends the room's window: closes it (room.LikeWindow.Close:
// its likers, not its likes, so the commands behind it wait well under a
// millisecond), appends its one row and answers each like.
func (g *grain) flushLikes(ctx actor.Context) {
	b := g.deps.likes.take(g)
	if b == nil || len(b.answers) == 0 {
		return
	}
	// The answers go out from a goroutine of their own once decided: a
	// window's thousands of sends would otherwise hold the room's
	// mailbox (the joins and gifts behind it) for milliseconds.
	var counted, dup, failed *v1.RoomResponse
	var refused map[string]*v1.RoomResponse
	defer func() {
		root := ctx.ActorSystem().Root
		go func() {
			for _, a := range b.answers {
				res := counted
				switch r, ok := refused[a.user]; {
				case failed != nil:
					res = failed
				case ok:
					res = r
				case a.retry:
					res = dup
				}
				if a.to != nil && res != nil {
					root.Send(a.to, res)
				}
			}
		}()
	}()
	sure := g.loaded && !g.unsure
	if err := g.gate(ctx); err != nil {
		failed = &v1.RoomResponse{Error: roomError(err)}
		return
	}
	if err := g.ensureLoaded(); err != nil {
		failed = &v1.RoomResponse{Error: roomError(err)}
		return
	}
	if !sure {
		// Reloaded: an append whose outcome was unknown may have counted
		// likes the window took for new. Nothing of it is counted; the
		// retries are decided against the reloaded receipts.
		failed = &v1.RoomResponse{Error: roomError(fmt.Errorf("%w: the room was reloaded; retry the like", errclass.Unavailable))}
		return
	}
	now := g.deps.Clock().UnixMilli()
	events, refusals := b.w.Close(g.state, now)
	k := g.key()
	for u, err := range refusals {
		if refused == nil {
			refused = make(map[string]*v1.RoomResponse, len(refusals))
		}
		like := room.Command{Type: room.CmdLikeRoom, AppCode: k.AppCode, RoomID: k.RoomID, UserID: u, NowMs: now}
		refused[u] = &v1.RoomResponse{Error: roomError(g.explain(like, err))}
	}
	dup = &v1.RoomResponse{Reply: g.likeDuplicate()}
	if len(events) == 0 {
		return
	}
	batch := room.Command{Type: room.CmdLikeRoom, CommandID: g.likesID(), AppCode: k.AppCode, RoomID: k.RoomID, NowMs: now}
	reply, err := g.commit(ctx, batch, events)
	if err != nil {
		// Nothing of the window is counted (or, after an append whose
		// answer was lost, the reload finds its receipts and the retries
		// are answered as duplicates).
		failed = &v1.RoomResponse{Error: roomError(err)}
		return
	}
	if lr := g.deps.likes.room(g, false); lr != nil {
		lr.idx.stored(b.w.Refs(), &g.state)
	}
	g.deps.PublishMetrics.likeWindow(events[0].(room.RoomLiked).Count)
	// The receipts are the room's own: a like's reply carries the
	// RoomLiked alone.
	counted = &v1.RoomResponse{Reply: &v1.CommandReply{RoomSeq: reply.RoomSeq, EventIds: reply.EventIds[:1], Events: reply.Events[:1], Room: reply.Room}}
	dup = &v1.RoomResponse{Reply: g.likeDuplicate()}
}

// dropLikes answers the window's likes with err, writing nothing: they
// were not counted, and their retries will be.
func (g *grain) dropLikes(ctx actor.Context, err error) {
	b := g.deps.likes.take(g)
	if b == nil {
		return
	}
	for _, a := range b.answers {
		if a.to != nil {
			ctx.Send(a.to, &v1.RoomResponse{Error: roomError(err)})
		}
	}
}

// likeDuplicate is the answer to a retry of a like counted before: the
// room now, marked duplicate, nothing written.
func (g *grain) likeDuplicate() *v1.CommandReply {
	return &v1.CommandReply{RoomSeq: g.state.Seq, Duplicate: true, Room: room.Summary(g.state)}
}

// likesID is the command_id of a window's log row: its seq, and a random
// part, so that a row another activation wrote at the same seq is never
// taken for this one (appendFailed looks the id up).
func (g *grain) likesID() string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	return room.LikesIDPrefix + strconv.FormatInt(g.state.Seq+1, 10) + "-" + hex.EncodeToString(r[:])
}

// ensureLoaded loads the state when it is not, or when an append's
// outcome is unknown (execute's rule for every write).
func (g *grain) ensureLoaded() error {
	if g.loaded && !g.unsure {
		return nil
	}
	return g.reload()
}

// explain lets the observers say more about a refusal (departures.go).
func (g *grain) explain(cmd room.Command, err error) error {
	for _, o := range g.observers() {
		if e, ok := o.(Explainer); ok {
			err = e.Explain(cmd, err)
		}
	}
	return err
}

// LikeMetrics count the rooms' like windows and the likes they counted:
// windows per second is the like rows (and IM messages) a node writes,
// likes over windows how well windows gather.
type LikeMetrics struct {
	Windows prometheus.Counter
	Likes   prometheus.Counter
}

func newLikeMetrics(reg prometheus.Registerer) (*LikeMetrics, error) {
	m := &LikeMetrics{
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
			return nil, fmt.Errorf("room: register like metrics: %w", err)
		}
	}
	return m, nil
}

func (m *PublishMetrics) likeWindow(likes int64) {
	if m != nil && m.Likes != nil {
		m.Likes.Windows.Inc()
		m.Likes.Likes.Add(float64(likes))
	}
}
