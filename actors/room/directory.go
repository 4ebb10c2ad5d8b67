package room

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/hyapp/roomcell/grpcapi/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// The room grain keeps the room directory (presence, user → room, heat
// ranking; persistence.Directory) in step with its state. The grain's
// state is the truth and the directory a read model of it, so:
//
//   - Directory writes never sit on the command path. After a commit the
//     grain hands the directory work to its own child actor (dirWorker),
//     which runs it in commit order; a failure is logged and counted and
//     never reaches the caller. A slow or dead Redis costs no command
//     latency; a full backlog drops work (counted) for the refresh to redo.
//   - Every entry is rebuilt from state: on activation and every
//     RefreshInterval the room re-registers (SyncRoom), which also settles
//     users that ended up in two rooms while the directory was away (the
//     newer join keeps the user).
//   - Moving a user out of their previous room is that room's own command:
//     a LeaveRoom (reason switched_room) sent through the cluster from a
//     goroutine, never from a mailbox, so two rooms trading users cannot
//     deadlock. Its command_id is derived from the join that caused it, so
//     a resent leave is deduplicated by the old room.
//   - RoomRankChanged: the rank is the directory's, known only after the
//     heat change is committed and written there, so it cannot be part of
//     the heat change's own commit. When the write reports a changed rank
//     (and the room was ranked before: entering the ranking is not a
//     change), the worker tells the grain, which commits RoomRankChanged as
//     a command of its own (command_id "rank-<seq>-<prev>-<rank>") through
//     the normal path: command log, outbox, no-op publish. With the
//     directory down there are no rank events, and nothing else is lost.

// Directory is what a room grain needs of the room directory;
// persistence.Directory satisfies it.
type Directory interface {
	Heartbeat(ctx context.Context, key persistence.RoomKey, userID string, nowMs int64) error
	SetUserRoom(ctx context.Context, key persistence.RoomKey, userID string, joinedAtMs int64) (string, error)
	ClearUserRoom(ctx context.Context, key persistence.RoomKey, userID string) error
	UserRoom(ctx context.Context, appCode, userID string) (persistence.UserRoom, error)
	UpdateRoom(ctx context.Context, e persistence.RoomEntry) (persistence.RankChange, error)
	RemoveRoom(ctx context.Context, key persistence.RoomKey) error
	SyncRoom(ctx context.Context, s persistence.RoomSync) (persistence.RankChange, []persistence.Claim, error)
}

// Commander runs a command at a room grain wherever the cluster placed it;
// *Client is the production one.
type Commander interface {
	Execute(ctx context.Context, rc *v1.RoomCommand) (*v1.CommandReply, error)
}

// DirectoryDeps connects room grains to the directory. The zero value
// (Directory nil) means no directory: nothing here runs.
type DirectoryDeps struct {
	Directory Directory
	// Hosted, when set, lists the rooms active on this node for the
	// presence stale worker.
	Hosted *Hosted
	// Rooms sends switched_room leaves; nil = a Client over the cluster
	// the grain was activated in.
	Rooms Commander
	// RefreshInterval: how often a live room re-registers
	// (presence.refresh_interval; default 30s).
	RefreshInterval time.Duration
	// Timeout bounds one directory call (default 2s).
	Timeout time.Duration
	// MaxBacklog: directory work items a room may have queued before new
	// ones are dropped for the refresh to redo (default 1000).
	MaxBacklog int64
	Metrics    *DirectoryMetrics // nil: not counted
}

func (d *DirectoryDeps) setDefaults() {
	if d.RefreshInterval <= 0 {
		d.RefreshInterval = 30 * time.Second
	}
	if d.Timeout <= 0 {
		d.Timeout = 2 * time.Second
	}
	if d.MaxBacklog <= 0 {
		d.MaxBacklog = 1000
	}
}

// Hosted is the node-local registry of active room grains: a grain adds
// itself on activation and removes itself when it stops. The presence stale
// worker scans exactly these rooms.
type Hosted struct{ m sync.Map }

// NewHosted returns an empty registry.
func NewHosted() *Hosted { return &Hosted{} }

// Add registers a room (grains call it on activation; tests may too).
func (h *Hosted) Add(k persistence.RoomKey) { h.m.Store(k, struct{}{}) }

// Remove unregisters a room.
func (h *Hosted) Remove(k persistence.RoomKey) { h.m.Delete(k) }

// Rooms returns the rooms active on this node, sorted.
func (h *Hosted) Rooms() []persistence.RoomKey {
	var out []persistence.RoomKey
	h.m.Range(func(k, _ any) bool {
		out = append(out, k.(persistence.RoomKey))
		return true
	})
	slices.SortFunc(out, func(a, b persistence.RoomKey) int {
		return cmp.Or(cmp.Compare(a.AppCode, b.AppCode), cmp.Compare(a.RoomID, b.RoomID))
	})
	return out
}

// DirectoryMetrics count what the grain-side directory work did.
type DirectoryMetrics struct {
	Errors      *prometheus.CounterVec // by op
	Dropped     prometheus.Counter
	Leaves      *prometheus.CounterVec // switched_room leaves sent, by result
	RankChanges prometheus.Counter
}

// NewDirectoryMetrics creates the instruments and registers them on reg.
func NewDirectoryMetrics(reg prometheus.Registerer) (*DirectoryMetrics, error) {
	m := &DirectoryMetrics{
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "room_directory_errors_total",
			Help: "Room directory calls of room grains that failed (the command they followed did not), by operation.",
		}, []string{"op"}),
		Dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "room_directory_dropped_total",
			Help: "Directory work items dropped because a room's directory backlog was full; the room's next refresh redoes them.",
		}),
		Leaves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "room_directory_switch_leaves_total",
			Help: "switched_room leaves sent to a user's previous room, by result (left, noop, failed).",
		}, []string{"result"}),
		RankChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "room_directory_rank_changes_total",
			Help: "RoomRankChanged events committed by rooms of this node.",
		}),
	}
	for _, c := range []prometheus.Collector{m.Errors, m.Dropped, m.Leaves, m.RankChanges} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("room: register directory metrics: %w", err)
		}
	}
	return m, nil
}

func (m *DirectoryMetrics) failed(op string) {
	if m != nil {
		m.Errors.WithLabelValues(op).Inc()
	}
}

func (m *DirectoryMetrics) dropped() {
	if m != nil {
		m.Dropped.Inc()
	}
}

func (m *DirectoryMetrics) leave(result string) {
	if m != nil {
		m.Leaves.WithLabelValues(result).Inc()
	}
}

func (m *DirectoryMetrics) rankChanged() {
	if m != nil {
		m.RankChanges.Inc()
	}
}

// cmdRankChanged is the command_type of the grain's own RoomRankChanged
// commits in the command log.
const cmdRankChanged = "RankChanged"

// dirLink is a grain's directory state for one activation.
type dirLink struct {
	deps    DirectoryDeps
	worker  *actor.PID
	backlog *atomic.Int64
	stop    scheduler.CancelFunc
	members *atomic.Pointer[map[string]int64] // shared with the worker
}

// dirRefresh is the periodic re-registration tick. It must not keep an
// idle room from passivating.
type dirRefresh struct{}

func (*dirRefresh) NotInfluenceReceiveTimeout() {}

// rankChanged is sent by the worker to its grain.
type rankChanged struct {
	seq  int64 // room seq the rank was read after
	rank persistence.RankChange
	heat int64
}

func (*rankChanged) NotInfluenceReceiveTimeout() {}

// dirWork is a batch of directory steps for the worker, run in order.
type dirWork struct{ steps []func(w *dirWorker) }

// dirStart connects a new activation: registers it as hosted, spawns the
// worker, starts the refresh timer and registers the room from its state.
func (g *grain) dirStart(ctx actor.Context, c *cluster.Cluster) {
	d := g.deps.Dir
	if d.Directory == nil {
		return
	}
	d.setDefaults()
	if d.Rooms == nil && c != nil {
		d.Rooms = &Client{Cluster: c, AttemptTimeout: 3 * time.Second}
	}
	l := &dirLink{deps: d, backlog: new(atomic.Int64), members: new(atomic.Pointer[map[string]int64])}
	l.members.Store(&g.state.Members)
	w := &dirWorker{key: g.key, deps: d, backlog: l.backlog, log: g.log, members: l.members}
	l.worker = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return w }))
	l.stop = scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendRepeatedly(d.RefreshInterval, d.RefreshInterval, ctx.Self(), &dirRefresh{})
	g.dir = l
	if d.Hosted != nil {
		d.Hosted.Add(g.key)
	}
	g.dirSync(ctx)
}

// dirStop ends the activation's link: on stop and on restart (a restarted
// grain starts a new one in its ClusterInit).
func (g *grain) dirStop() {
	if g.dir == nil {
		return
	}
	g.dir.stop()
	if g.dir.deps.Hosted != nil {
		g.dir.deps.Hosted.Remove(g.key)
	}
	g.dir = nil
}

// dirUnlist takes a passivating room off the listing right away (inline:
// its worker stops with it). A room that stops any other way (rebalance,
// shutdown, crash) stays listed until it comes back or its entry expires.
func (g *grain) dirUnlist() {
	if g.dir == nil || !g.state.Exists {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.dir.deps.Timeout)
	defer cancel()
	if err := g.dir.deps.Directory.RemoveRoom(ctx, g.key); err != nil {
		g.dir.deps.Metrics.failed("remove_room")
		g.log.Warn("directory: unlisting passivated room failed; its entry expires", "error", err)
	}
}

// dirReceive handles the directory's own messages.
func (g *grain) dirReceive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *dirRefresh:
		if !g.loaded && g.load() != nil {
			return // the store is away too; the next tick or command retries
		}
		g.dirSync(ctx)
	case *rankChanged:
		g.commitRank(ctx, m)
	}
}

// enqueue hands steps to the worker unless its backlog is full.
func (g *grain) enqueue(ctx actor.Context, steps ...func(w *dirWorker)) {
	if g.dir == nil || len(steps) == 0 {
		return
	}
	if g.dir.backlog.Load() >= g.dir.deps.MaxBacklog {
		g.dir.deps.Metrics.dropped()
		return
	}
	g.dir.backlog.Add(1)
	ctx.Send(g.dir.worker, &dirWork{steps: steps})
}

// dirSync registers the room from its state (activation and refresh).
func (g *grain) dirSync(ctx actor.Context) {
	if g.dir == nil || !g.loaded || !g.state.Exists {
		return
	}
	if g.state.Status == StatusClosed {
		g.enqueue(ctx, func(w *dirWorker) { w.removeRoom() })
		return
	}
	s := persistence.RoomSync{Entry: g.entry(), Members: maps.Clone(g.state.Members), NowMs: g.deps.Clock().UnixMilli()}
	seq := g.state.Seq
	g.enqueue(ctx, func(w *dirWorker) { w.sync(s, seq) })
}

func (g *grain) entry() persistence.RoomEntry {
	s := g.state
	return persistence.RoomEntry{
		AppCode: s.AppCode, RoomID: s.RoomID, Name: s.Name, OwnerUserID: s.Owner,
		MemberCount: int64(len(s.Members)), Heat: s.Heat, UpdatedAtMs: g.deps.Clock().UnixMilli(),
	}
}

// dirHeartbeat refreshes presence after a heartbeat passed Decide.
func (g *grain) dirHeartbeat(ctx actor.Context, cmd Command) {
	if g.dir == nil || cmd.Type != CmdHeartbeat {
		return
	}
	user, now := cmd.UserID, cmd.NowMs
	g.enqueue(ctx, func(w *dirWorker) { w.heartbeat(user, now) })
}

// dirCheck runs before a switched_room leave is decided: if the directory
// says the user is back in this room (they rejoined after the join that
// sent the leave), the leave is stale and refused. A directory that cannot
// answer does not hold the leave back.
func (g *grain) dirCheck(cmd Command) error {
	if g.dir == nil || cmd.Type != CmdLeaveRoom || cmd.Reason != ReasonSwitchedRoom {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.dir.deps.Timeout)
	defer cancel()
	ur, err := g.dir.deps.Directory.UserRoom(ctx, cmd.AppCode, cmd.UserID)
	if err != nil {
		if !errors.Is(err, persistence.ErrNotFound) {
			g.dir.deps.Metrics.failed("user_room")
		}
		return nil
	}
	if ur.RoomID == g.key.RoomID {
		return fmt.Errorf("%w: user %s is back in this room", ErrPrecondition, cmd.UserID)
	}
	return nil
}

// dirCommitted queues the directory work of a committed command; prev is
// the state before it, g.state the state after.
func (g *grain) dirCommitted(ctx actor.Context, cmd Command, prev State, events []Event) {
	if g.dir == nil {
		return
	}
	members := g.state.Members
	g.dir.members.Store(&members)
	var steps []func(w *dirWorker)
	joined := false
	listed := false
	for _, ev := range events {
		switch e := ev.(type) {
		case RoomCreated:
			listed = true
		case RoomUserJoined:
			joined = joined || e.UserID == cmd.UserID
			user, at, cmdID := e.UserID, e.JoinedAtMs, cmd.CommandID
			steps = append(steps, func(w *dirWorker) { w.join(user, at, cmdID) })
		case RoomUserLeft:
			user := e.UserID
			steps = append(steps, func(w *dirWorker) { w.clear(user) })
		case RoomUserKicked:
			user := e.TargetUserID
			steps = append(steps, func(w *dirWorker) { w.clear(user) })
		case RoomHeatChanged:
			listed = true
		case RoomClosed:
			for _, u := range prev.SortedMembers() {
				steps = append(steps, func(w *dirWorker) { w.clear(u) })
			}
			steps = append(steps, func(w *dirWorker) { w.removeRoom() })
		}
	}
	// Joining a room one is already in is a no-op for the room but says
	// "this is my room now": a user who drifted into two rooms picks one.
	if cmd.Type == CmdJoinRoom && !joined && g.state.IsMember(cmd.UserID) {
		user, at, cmdID := cmd.UserID, cmd.NowMs, cmd.CommandID
		steps = append(steps, func(w *dirWorker) { w.join(user, at, cmdID) })
	}
	if g.state.Status == StatusOpen && (listed || len(prev.Members) != len(g.state.Members) || prev.Name != g.state.Name) {
		e, seq := g.entry(), g.state.Seq
		steps = append(steps, func(w *dirWorker) { w.update(e, seq) })
	}
	g.enqueue(ctx, steps...)
}

// commitRank commits RoomRankChanged for a rank the worker read.
func (g *grain) commitRank(ctx actor.Context, m *rankChanged) {
	if !g.loaded || !g.state.Exists || g.state.Status != StatusOpen {
		return
	}
	id := fmt.Sprintf("rank-%d-%d-%d", m.seq, m.rank.Prev, m.rank.Rank)
	if _, seen := g.recent[id]; seen {
		return
	}
	cmd := Command{Type: cmdRankChanged, CommandID: id, AppCode: g.key.AppCode, RoomID: g.key.RoomID, NowMs: g.deps.Clock().UnixMilli()}
	ev := RoomRankChanged{Rank: m.rank.Rank, PrevRank: m.rank.Prev, Heat: m.heat}
	if _, err := g.commit(ctx, cmd, []Event{ev}); err != nil {
		g.log.Warn("directory: RoomRankChanged not committed", "command_id", id, "error", err)
		return
	}
	if g.dir != nil {
		g.dir.deps.Metrics.rankChanged()
	}
}

// dirWorker is a room grain's child that runs its directory work in
// order, off the command path.
type dirWorker struct {
	key     persistence.RoomKey
	deps    DirectoryDeps
	backlog *atomic.Int64
	log     *slog.Logger
	ctx     actor.Context // set while Receive runs
	// members is the grain's newest committed membership (user →
	// joined_at_ms), published after every commit. State maps are never
	// changed once committed, so reading it here is safe.
	members *atomic.Pointer[map[string]int64]
}

// current reports whether the join of user at joinedAtMs is still the
// user's membership here. Work runs after the commit that asked for it, and
// two rooms' work is not ordered: by then the user may have left (and
// joined elsewhere), and acting on the old join would overwrite the
// directory entry of the room they are in now and evict them from it.
// What stays unordered: a user who joins a second room without leaving the
// first, faster than the first room's directory write, may be kept by the
// first (older) room; still exactly one room, the one the directory names.
func (w *dirWorker) current(user string, joinedAtMs int64) bool {
	m := w.members.Load()
	if m == nil {
		return true
	}
	at, ok := (*m)[user]
	return ok && at == joinedAtMs
}

func (w *dirWorker) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*dirWork); ok {
		w.ctx = ctx
		for _, step := range m.steps {
			step(w)
		}
		w.ctx = nil
		w.backlog.Add(-1)
	}
}

func (w *dirWorker) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), w.deps.Timeout)
}

func (w *dirWorker) failed(op string, err error, attrs ...any) {
	w.deps.Metrics.failed(op)
	w.log.Warn("directory: "+op+" failed; the room's next refresh repairs it", append(attrs, "error", err)...)
}

func (w *dirWorker) heartbeat(user string, nowMs int64) {
	ctx, cancel := w.call()
	defer cancel()
	if err := w.deps.Directory.Heartbeat(ctx, w.key, user, nowMs); err != nil {
		w.failed("heartbeat", err, "user_id", user)
	}
}

func (w *dirWorker) join(user string, joinedAtMs int64, joinCommandID string) {
	if !w.current(user, joinedAtMs) {
		return // the leave that ended it is queued behind and clears up
	}
	ctx, cancel := w.call()
	defer cancel()
	prev, err := w.deps.Directory.SetUserRoom(ctx, w.key, user, joinedAtMs)
	if err != nil {
		w.failed("set_user_room", err, "user_id", user)
		return
	}
	// Once the swap is made this room must let prev go even if it lost the
	// user meanwhile: every displaced room is displaced by exactly one
	// swap, and only its displacer evicts it (one room per user).
	if prev != "" {
		w.leave(prev, user, derivedID("join", w.key.RoomID, joinCommandID, user))
	}
}

func (w *dirWorker) clear(user string) {
	ctx, cancel := w.call()
	defer cancel()
	if err := w.deps.Directory.ClearUserRoom(ctx, w.key, user); err != nil {
		w.failed("clear_user_room", err, "user_id", user)
	}
}

func (w *dirWorker) removeRoom() {
	ctx, cancel := w.call()
	defer cancel()
	if err := w.deps.Directory.RemoveRoom(ctx, w.key); err != nil {
		w.failed("remove_room", err)
	}
}

func (w *dirWorker) update(e persistence.RoomEntry, seq int64) {
	ctx, cancel := w.call()
	defer cancel()
	rc, err := w.deps.Directory.UpdateRoom(ctx, e)
	if err != nil {
		w.failed("update_room", err)
		return
	}
	w.rank(rc, e.Heat, seq)
}

func (w *dirWorker) rank(rc persistence.RankChange, heat, seq int64) {
	if rc.Prev > 0 && rc.Prev != rc.Rank {
		w.ctx.Send(w.ctx.Parent(), &rankChanged{seq: seq, rank: rc, heat: heat})
	}
}

func (w *dirWorker) sync(s persistence.RoomSync, seq int64) {
	ctx, cancel := w.call()
	defer cancel()
	rc, claims, err := w.deps.Directory.SyncRoom(ctx, s)
	if err != nil {
		w.failed("sync_room", err)
		return
	}
	w.rank(rc, s.Entry.Heat, seq)
	for _, c := range claims {
		joined := fmt.Sprint(s.Members[c.UserID])
		if c.Won {
			// This room holds the newer join: the other lets go.
			w.leave(c.Other, c.UserID, derivedID("won", w.key.RoomID, joined, c.UserID))
		} else {
			// The other room holds the newer join: this one lets go,
			// through its own mailbox like any leave.
			w.leave(w.key.RoomID, c.UserID, derivedID("lost", w.key.RoomID, joined, c.UserID))
		}
	}
}

// leave tells room to let user go, from a goroutine: the worker must not
// wait on another grain, and the leave may go to this very room. The
// command_id is deterministic, so a leave resent by a later refresh or
// retried here is deduplicated by the room; a user no longer in the room
// (or a leave refused as stale) ends it. Retries are bounded: a leave that
// never lands is redone by the next refresh of either room.
func (w *dirWorker) leave(roomID, user, commandID string) {
	rooms, m, log := w.deps.Rooms, w.deps.Metrics, w.log
	if rooms == nil {
		m.leave("failed")
		log.Warn("directory: no cluster to send a switched_room leave through", "to_room_id", roomID, "user_id", user)
		return
	}
	rc := &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
		CommandId: commandID, AppCode: w.key.AppCode, RoomId: roomID, UserId: user, Reason: ReasonSwitchedRoom}}}
	go func() {
		backoff := 200 * time.Millisecond
		var err error
		for range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = rooms.Execute(ctx, rc)
			cancel()
			switch {
			case err == nil:
				m.leave("left")
				return
			case errors.Is(err, ErrPrecondition), errors.Is(err, ErrNotFound):
				m.leave("noop") // not a member any more, room closed or gone, or back here
				return
			case !errors.Is(err, ErrUnavailable):
				m.leave("failed")
				log.Warn("directory: switched_room leave refused", "to_room_id", roomID, "user_id", user, "error", err)
				return
			}
			time.Sleep(backoff)
			backoff *= 4
		}
		m.leave("failed")
		log.Warn("directory: switched_room leave did not land; the next refresh resends it", "to_room_id", roomID, "user_id", user, "error", err)
	}()
}

// derivedID is a command_id derived from the facts that caused a
// directory-driven command: the same facts give the same id (so rooms
// dedupe resends) and it passes CheckID (no ':' or '/', short).
func derivedID(kind string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(kind))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return "dir-" + kind + "-" + hex.EncodeToString(h.Sum(nil))[:32]
}
