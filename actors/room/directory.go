package room

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// The room grain keeps the room directory (presence, user → room, heat
// ranking; persistence.Directory) in step with its state. The grain's
// state is the truth and the directory a read model of it, so:
//
//   - Directory writes never sit on the command path. After a commit the
//     grain hands the directory work to its worker (dirWorker), which runs
//     it in commit order on its own queue (serial.go); a failure is logged
//     and counted and never reaches the caller. A slow or dead Redis costs
//     no command latency; a full backlog drops work (counted) for the
//     refresh to redo.
//   - Every entry is rebuilt from state: on activation and every
//     RefreshInterval the room re-registers (SyncRoom), which also settles
//     users that ended up in two rooms while the directory was away (the
//     newer join keeps the user).
//   - Moving a user out of their previous room is that room's own command:
//     a LeaveRoom (reason switched_room) sent through the cluster from a
//     goroutine, never from a mailbox, so two rooms trading users cannot
//     deadlock. Its command_id is derived from the join that caused it, so
//     a resent leave is deduplicated by the old room, and it carries that
//     join's time: the old room refuses it when the user joined it again
//     after that time (a leave may arrive late; the newest join wins).
//   - Two rooms' directory work is not ordered, and a room's worker runs
//     after the commit it follows: by the time a join is written the user
//     may have left and joined elsewhere. The write returns the entry it
//     replaced with its join time, and the worker looks at its room's
//     membership again after the write: only an older join (or, on a tie,
//     one displaced by a join that still holds) is told to let go; a newer
//     one, or any one displaced by a join that already ended, gets its
//     entry back.
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
	SetUserRoom(ctx context.Context, key persistence.RoomKey, userID string, joinedAtMs int64) (persistence.UserRoom, error)
	ClaimUserRoom(ctx context.Context, key persistence.RoomKey, userID string, joinedAtMs int64) (persistence.Claim, error)
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
	// presence stale worker and spreads their refreshes over
	// RefreshInterval (one per node and actor system); without it each
	// room keeps its own timer.
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
	// ListingGap is the least time between two listing writes of a room
	// (default 250ms): the first change after a quiet spell is written at
	// once, the ones within the gap merge into one write at its end. A
	// busy room changes its member count with every join, and a write per
	// command was ~12% of a dev node's allocations under joins.
	ListingGap time.Duration
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
	if d.ListingGap <= 0 {
		d.ListingGap = 250 * time.Millisecond
	}
}

// cmdRankChanged is the command_type of the grain's own RoomRankChanged
// commits in the command log.
const cmdRankChanged = "RankChanged"

// dirLink is a grain's directory state for one activation, in one
// allocation with its worker (an active room pays for it as long as it
// lives: six allocations were ~900 bytes).
type dirLink struct {
	deps    *DirectoryDeps // the node's (Deps.dirDeps)
	worker  dirWorker
	backlog atomic.Int64
	root    *actor.RootContext
	self    *actor.PID           // the grain; registered in deps.Hosted, which refreshes it
	stop    scheduler.CancelFunc // the room's own refresh timer, without Hosted
	joins   joinTimes            // shared with the worker
	// The listing entry and the refresh are state, not history: only the
	// newest matters. One of each waits in the worker's queue at most;
	// later ones merge into it (a busy room writes its entry once per
	// worker round, and a slow directory does not pile refreshes up).
	entry      atomic.Pointer[entryUpdate] // newest entry not yet written
	syncQueued atomic.Bool
}

// tell sends the grain a message (a rank change to commit).
func (l *dirLink) tell(m any) { l.root.Send(l.self, m) }

// entryUpdate is a listing entry and the room seq it was taken at.
type entryUpdate struct {
	e   persistence.RoomEntry
	seq int64
}

// dirRefresh is the periodic re-registration tick. It must not keep an
// idle room from passivating.
type dirRefresh struct{}

func (*dirRefresh) NotInfluenceReceiveTimeout() {}

// refreshTick is every room's refresh message (it carries nothing).
var refreshTick = &dirRefresh{}

// rankChanged is sent by the worker to its grain.
type rankChanged struct {
	seq  int64 // room seq the rank was read after
	rank persistence.RankChange
	heat int64
}

func (*rankChanged) NotInfluenceReceiveTimeout() {}

// dirStart connects a new activation: makes the worker, registers the
// activation as hosted (Hosted's wheel refreshes it; without Hosted, its
// own timer) and registers the room from its state.
func (g *grain) dirStart(ctx actor.Context, c *cluster.Cluster) {
	if g.deps.Dir.Directory == nil {
		return
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	l := &dirLink{deps: g.deps.dirDeps(c), root: root, self: self}
	l.joins.members = g.state.Members
	w := &l.worker
	*w = dirWorker{key: g.key(), link: l, log: g.log}
	log := g.log
	w.run.panicked = func(p any, stack []byte) {
		// The room's next refresh rebuilds whatever the step left undone.
		log.Error("room directory worker panicked; the room's next refresh repairs the directory", "panic", fmt.Sprint(p), "stack", string(stack))
	}
	g.dir = l
	if d := l.deps; d.Hosted != nil {
		d.Hosted.add(g.key(), self, func(pid *actor.PID) { root.Send(pid, refreshTick) }, d.RefreshInterval)
	} else {
		l.stop = scheduler.NewTimerScheduler(root).SendRepeatedly(d.RefreshInterval, d.RefreshInterval, self, refreshTick)
	}
	g.dirSync()
}

// sharedDir is a node's DirectoryDeps with its defaults, made once.
type sharedDir struct {
	once sync.Once
	d    DirectoryDeps
}

// dirDeps returns Dir with its defaults and, when it has none, a room
// client on c for the rank's RankChanged commands. Made once per node when
// GrainProps made d.dir: a copy and a client in every room were ~120
// bytes of each active room.
func (d *Deps) dirDeps(c *cluster.Cluster) *DirectoryDeps {
	resolve := func(dd *DirectoryDeps) {
		*dd = d.Dir
		dd.setDefaults()
		if dd.Rooms == nil && c != nil {
			dd.Rooms = &Client{Cluster: c, AttemptTimeout: 3 * time.Second}
		}
	}
	if d.dir == nil {
		dd := new(DirectoryDeps)
		resolve(dd)
		return dd
	}
	d.dir.once.Do(func() { resolve(&d.dir.d) })
	return &d.dir.d
}

// dirStop ends the activation's link: on stop and on restart (a restarted
// grain starts a new one in its ClusterInit).
func (g *grain) dirStop() {
	if g.dir == nil {
		return
	}
	if g.dir.stop != nil {
		g.dir.stop()
	}
	g.dir.worker.run.stop() // queued work and a held-back listing write go
	if g.dir.deps.Hosted != nil {
		g.dir.deps.Hosted.remove(g.key(), g.dir.self)
	}
	g.dir = nil
}

// dirUnlist takes a passivating room off the listing right away (inline:
// the worker's queue is dropped when the grain stops). A room that stops
// any other way (rebalance, shutdown, crash) stays listed until it comes
// back or its entry expires.
func (g *grain) dirUnlist() {
	if g.dir == nil || !g.state.Exists {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.dir.deps.Timeout)
	defer cancel()
	if err := g.dir.deps.Directory.RemoveRoom(ctx, g.key()); err != nil {
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
		g.dirSync()
	case *rankChanged:
		g.commitRank(ctx, m)
	}
}

// enqueue hands steps to the worker unless its backlog is full.
func (g *grain) enqueue(steps ...func(w *dirWorker)) bool {
	if g.dir == nil || len(steps) == 0 {
		return false
	}
	if g.dir.backlog.Load() >= g.dir.deps.MaxBacklog {
		g.dir.deps.Metrics.dropped()
		return false
	}
	g.dir.backlog.Add(1)
	w := &g.dir.worker
	if !w.run.post(func() { w.work(steps) }) {
		g.dir.backlog.Add(-1)
		return false
	}
	return true
}

// dirSync registers the room from its state (activation and refresh).
func (g *grain) dirSync() {
	if g.dir == nil || !g.loaded || !g.state.Exists {
		return
	}
	if g.state.Status == room.StatusClosed {
		g.enqueue(func(w *dirWorker) { w.removeRoom() })
		return
	}
	if !g.dir.syncQueued.CompareAndSwap(false, true) {
		return // the queued one has not started: a refresh is due anyway
	}
	s := persistence.RoomSync{Entry: g.entry(), Members: g.dir.joins.all(), NowMs: g.deps.Clock().UnixMilli()}
	seq := g.state.Seq
	if !g.enqueue(func(w *dirWorker) { w.sync(s, seq) }) {
		g.dir.syncQueued.Store(false)
	}
}

func (g *grain) entry() persistence.RoomEntry {
	s := g.state
	e := persistence.RoomEntry{
		AppCode: s.AppCode, RoomID: s.RoomID, Name: s.Name, OwnerUserID: s.Owner,
		MemberCount: int64(len(s.Members)), Heat: s.Heat, UpdatedAtMs: g.deps.Clock().UnixMilli(),
	}
	if m := s.Metadata(); m.Category != "" || m.Tags != nil || m.CoverURL != "" || m.Visibility != "" {
		// Tags is shared read-only: a change replaces the slice (setMeta).
		e.Meta = &persistence.RoomMeta{Category: m.Category, Tags: m.Tags, CoverURL: m.CoverURL, Visibility: m.Visibility}
	}
	return e
}

// dirHeartbeat refreshes presence after a heartbeat passed Decide.
func (g *grain) dirHeartbeat(cmd room.Command) {
	if g.dir == nil || cmd.Type != room.CmdHeartbeat {
		return
	}
	user, now := cmd.UserID, cmd.NowMs
	g.enqueue(func(w *dirWorker) { w.heartbeat(user, now) })
}

// dirCheck runs before a switched_room leave is decided: if the user
// joined this room again after the join that sent the leave (staleLeave),
// or the directory says they are back in this room, the leave is stale and
// refused. A directory that cannot answer does not hold the leave back.
func (g *grain) dirCheck(cmd room.Command) error {
	if g.dir == nil || cmd.Type != room.CmdLeaveRoom || cmd.Reason != room.ReasonSwitchedRoom {
		return nil
	}
	if g.staleLeave(cmd) {
		return fmt.Errorf("%w: user %s joined this room again after the join that displaced them", errclass.Precondition, cmd.UserID)
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
	if ur.RoomID == g.key().RoomID {
		return fmt.Errorf("%w: user %s is back in this room", errclass.Precondition, cmd.UserID)
	}
	return nil
}

// staleLeave reports whether a switched_room leave ends a membership newer
// than the join that displaced it: the user joined this room again after
// that join, and the leave is refused. The bound is part of the leave's
// derived command_id (leaveID); a command_id of another shape has none.
func (g *grain) staleLeave(cmd room.Command) bool {
	if cmd.Type != room.CmdLeaveRoom || cmd.Reason != room.ReasonSwitchedRoom {
		return false
	}
	upTo, ok := leaveBound(cmd.CommandID)
	if !ok {
		return false
	}
	at, member := g.dir.joins.at(cmd.UserID)
	return member && at > upTo
}

// dirBefore is what the directory needs of the state before a command
// (the grain changes its state in place): the member count and name, and
// the members a RoomClosed sends away.
type dirBefore struct {
	members int
	name    string
	closing []string
}

func (g *grain) dirBefore(events []room.Event) dirBefore {
	b := dirBefore{members: len(g.state.Members), name: g.state.Name}
	if g.dir != nil && slices.ContainsFunc(events, func(e room.Event) bool { _, ok := e.(room.RoomClosed); return ok }) {
		b.closing = g.state.SortedMembers()
	}
	return b
}

// dirCommitted queues the directory work of a committed command; prev is
// the state before it, g.state the state after.
func (g *grain) dirCommitted(cmd room.Command, prev dirBefore, events []room.Event) {
	if g.dir == nil {
		return
	}
	var steps []func(w *dirWorker)
	updating := false
	rejoined := g.dir.joins.rejoined // written by this goroutine only
	joined := false
	listed := false
	for _, ev := range events {
		switch e := ev.(type) {
		case room.RoomCreated:
			listed = true
		case room.RoomUserJoined:
			joined = joined || e.UserID == cmd.UserID
			user, at, cmdID := e.UserID, e.JoinedAtMs, cmd.CommandID
			steps = append(steps, func(w *dirWorker) { w.join(user, at, cmdID) })
		case room.RoomUserLeft:
			user := e.UserID
			rejoined = without(rejoined, user)
			steps = append(steps, func(w *dirWorker) { w.clear(user) })
		case room.RoomUserKicked:
			user := e.TargetUserID
			rejoined = without(rejoined, user)
			steps = append(steps, func(w *dirWorker) { w.clear(user) })
		case room.RoomHeatChanged, room.RoomMetadataChanged:
			listed = true
		case room.RoomClosed:
			for _, u := range prev.closing {
				steps = append(steps, func(w *dirWorker) { w.clear(u) })
			}
			steps = append(steps, func(w *dirWorker) { w.removeRoom() })
		}
	}
	// Joining a room one is already in is a no-op for the room but says
	// "this is my room now": a user who drifted into two rooms picks one.
	if cmd.Type == room.CmdJoinRoom && !joined && g.state.IsMember(cmd.UserID) {
		user, at, cmdID := cmd.UserID, cmd.NowMs, cmd.CommandID
		rejoined = maps.Clone(rejoined)
		if rejoined == nil {
			rejoined = map[string]int64{}
		}
		rejoined[user] = at
		steps = append(steps, func(w *dirWorker) { w.join(user, at, cmdID) })
	}
	if g.state.Status == room.StatusClosed {
		rejoined = nil
	}
	// Published before the reply: a join elsewhere that follows this
	// command is written only after the worker can see it (dirWorker.join).
	// The members were published by applyCommitted, under the same lock.
	g.dir.joins.setRejoined(rejoined)
	if g.state.Status == room.StatusOpen && (listed || prev.members != len(g.state.Members) || prev.name != g.state.Name) {
		if g.dir.entry.Swap(&entryUpdate{e: g.entry(), seq: g.state.Seq}) == nil {
			updating = true
			steps = append(steps, func(w *dirWorker) { w.update() })
		}
	}
	if !g.enqueue(steps...) && updating {
		g.dir.entry.Store(nil) // dropped with its step: the refresh redoes it
	}
}

// without returns m less user, copied only when user is in it.
func without(m map[string]int64, user string) map[string]int64 {
	if _, ok := m[user]; !ok {
		return m
	}
	m = maps.Clone(m)
	delete(m, user)
	return m
}

// commitRank commits RoomRankChanged for a rank the worker read.
func (g *grain) commitRank(ctx actor.Context, m *rankChanged) {
	if !g.loaded || !g.state.Exists || g.state.Status != room.StatusOpen {
		return
	}
	id := fmt.Sprintf("%s%d-%d-%d", room.RankIDPrefix, m.seq, m.rank.Prev, m.rank.Rank)
	if g.recent.has(id) {
		return
	}
	cmd := room.Command{Type: cmdRankChanged, CommandID: id, AppCode: g.key().AppCode, RoomID: g.key().RoomID, NowMs: g.deps.Clock().UnixMilli()}
	ev := room.RoomRankChanged{Rank: m.rank.Rank, PrevRank: m.rank.Prev, Heat: m.heat}
	if _, err := g.commit(ctx, cmd, []room.Event{ev}); err != nil {
		g.log.Warn("directory: RoomRankChanged not committed", "command_id", id, "error", err)
		return
	}
	if g.dir != nil {
		g.dir.deps.Metrics.rankChanged()
	}
}
