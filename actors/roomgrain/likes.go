package roomgrain

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
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

// likeBatch is a room's open window: its likes' commands, whom to
// answer, and its likes by LikeID.
type likeBatch struct {
	cmds    []room.Command
	senders []*actor.PID
	ids     map[string]room.LikeRef
	timer   *time.Timer
}

// likeRoom is what a room activation keeps for its likes: the open
// window and the index of its receipts by LikeID (built from the state
// when its receipts changed: apply replaces their map on every change).
type likeRoom struct {
	batch *likeBatch
	ids   map[string]room.LikeRef
	of    unsafe.Pointer // the receipts map ids was built from
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

// open returns g's window, opening one (with its timer) if none is.
func (w *likeWindows) open(g *grain, arm func(b *likeBatch) *time.Timer) *likeBatch {
	lr := w.room(g, true)
	if lr.batch == nil {
		lr.batch = &likeBatch{ids: map[string]room.LikeRef{}}
		lr.batch.timer = arm(lr.batch)
	}
	return lr.batch
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
	receipts := g.state.Extra
	lr := g.deps.likes.room(g, false)
	if (receipts == nil || receipts.LikeReceipts == nil) && (lr == nil || lr.batch == nil) {
		return ref, false // no likes: no hash
	}
	id := room.LikeID(commandID)
	if lr != nil && lr.batch != nil {
		if ref, ok = lr.batch.ids[id]; ok {
			return ref, true
		}
	}
	if receipts == nil || receipts.LikeReceipts == nil {
		return ref, false
	}
	if lr == nil {
		lr = g.deps.likes.room(g, true)
	}
	if of := reflect.ValueOf(receipts.LikeReceipts).UnsafePointer(); lr.ids == nil || lr.of != of {
		lr.ids, lr.of = room.LikeIDs(g.state), of
	}
	ref, ok = lr.ids[id]
	return ref, ok
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
	if rec, err := room.LikeRecorded(g.state, cmd); err != nil || rec {
		if err != nil {
			refuse(err)
			return
		}
		ctx.Respond(&v1.RoomResponse{Reply: g.likeDuplicate()})
		return
	}
	if ref, ok := g.likeRefOf(cmd.CommandID); ok {
		if err := room.LikeConflict(cmd, ref); err != nil {
			refuse(err)
			return
		}
		// The same like again while its window is open: answered with
		// the window (DecideLikes counts it once).
	} else if g.recent.has(cmd.CommandID) {
		// An id of another command (older ones are not looked up: a
		// store read per like would cost more than the likes).
		if _, err := g.recorded(cmd); err == nil || errors.Is(err, errclass.Exists) {
			refuse(fmt.Errorf("%w: command_id %q was already used for another command", errclass.Exists, cmd.CommandID))
			return
		}
	}
	// The rules now, so what they refuse is refused at once, with
	// nothing written; the window decides them again at its end.
	if err := room.CheckLike(g.state, cmd); err != nil {
		refuse(g.explain(cmd, err))
		return
	}
	for _, o := range g.observers() {
		if err := o.Check(cmd); err != nil {
			refuse(err)
			return
		}
	}
	self, sys, window := ctx.Self(), ctx.ActorSystem(), g.deps.likeWindow()
	b := g.deps.likes.open(g, func(b *likeBatch) *time.Timer {
		return time.AfterFunc(window, func() { sys.Root.Send(self, &likesDue{b: b}) })
	})
	b.cmds = append(b.cmds, cmd)
	b.senders = append(b.senders, ctx.Sender())
	if _, ok := b.ids[room.LikeID(cmd.CommandID)]; !ok {
		b.ids[room.LikeID(cmd.CommandID)] = room.LikeRef{UserID: cmd.UserID, Receipt: room.LikeReceiptOf(cmd)}
	}
	if len(b.cmds) >= maxLikeBatch {
		g.flushLikes(ctx)
	}
}

// likesDue ends the window m names, if it is still the room's open one.
func (g *grain) likesDue(ctx actor.Context, m *likesDue) {
	if g.deps.likes.get(g) == m.b {
		g.flushLikes(ctx)
	}
}

// flushLikes ends the room's window: decides its likes, appends their
// one row and answers each like.
func (g *grain) flushLikes(ctx actor.Context) {
	b := g.deps.likes.take(g)
	if b == nil || len(b.cmds) == 0 {
		return
	}
	answer := func(i int, res *v1.RoomResponse) {
		if b.senders[i] != nil {
			ctx.Send(b.senders[i], res)
		}
	}
	fail := func(err error) {
		for i := range b.cmds {
			answer(i, &v1.RoomResponse{Error: roomError(err)})
		}
	}
	if err := g.gate(ctx); err != nil {
		fail(err)
		return
	}
	if err := g.ensureLoaded(); err != nil {
		fail(err)
		return
	}
	now := g.deps.Clock().UnixMilli()
	events, outcomes := room.DecideLikes(g.state, b.cmds, now)
	var counted, dup *v1.CommandReply
	if len(events) > 0 {
		batch := room.Command{Type: room.CmdLikeRoom, CommandID: g.likesID(), AppCode: b.cmds[0].AppCode, RoomID: b.cmds[0].RoomID, NowMs: now}
		reply, err := g.commit(ctx, batch, events)
		if err != nil {
			// Nothing of the window is counted (or, after an append
			// whose answer was lost, the reload finds its receipts and
			// the retries are answered as duplicates).
			fail(err)
			return
		}
		g.deps.PublishMetrics.likeWindow(events[0].(room.RoomLiked).Count)
		// The receipts are the room's own: a like's reply carries the
		// RoomLiked alone.
		counted = &v1.CommandReply{RoomSeq: reply.RoomSeq, EventIds: reply.EventIds[:1], Events: reply.Events[:1], Room: reply.Room}
	}
	for i, o := range outcomes {
		switch {
		case o.Err != nil:
			answer(i, &v1.RoomResponse{Error: roomError(g.explain(b.cmds[i], o.Err))})
		case o.Recorded:
			if dup == nil {
				dup = g.likeDuplicate()
			}
			answer(i, &v1.RoomResponse{Reply: dup})
		default:
			answer(i, &v1.RoomResponse{Reply: counted})
		}
	}
}

// dropLikes answers the window's likes with err, writing nothing: they
// were not counted, and their retries will be.
func (g *grain) dropLikes(ctx actor.Context, err error) {
	b := g.deps.likes.take(g)
	if b == nil {
		return
	}
	for _, s := range b.senders {
		if s != nil {
			ctx.Send(s, &v1.RoomResponse{Error: roomError(err)})
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
