package directory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// Directory is what a room needs of the room directory;
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
// *roomgrain.Client is the production one.
type Commander interface {
	Execute(ctx context.Context, rc *v1.RoomCommand) (*v1.CommandReply, error)
}

// Deps connects a node's rooms to the directory. Directory nil means no
// directory: New's observers are nil and nothing here runs.
type Deps struct {
	Directory Directory
	// Hosted, when set, lists the rooms active on this node for the
	// presence stale worker and spreads their refreshes over
	// RefreshInterval (one per node and actor system); without it each
	// room keeps its own timer.
	Hosted *Hosted
	// Rooms sends switched_room leaves; nil = a roomgrain.Client over the
	// cluster the first room was activated in.
	Rooms Commander
	// RefreshInterval: how often a live room re-registers
	// (presence.refresh_interval; zero: its configs default).
	RefreshInterval time.Duration
	// Timeout bounds one directory call (directory.timeout; zero: its
	// configs default).
	Timeout time.Duration
	// MaxBacklog: directory work items a room may have queued before new
	// ones are dropped for the refresh to redo (directory.max_backlog;
	// zero: its configs default).
	MaxBacklog int64
	// ListingGap is the least time between two listing writes of a room
	// (directory.listing_gap; zero: its configs default): the first change after a quiet spell is written at
	// once, the ones within the gap merge into one write at its end. A
	// busy room changes its member count with every join, and a write per
	// command was ~12% of a dev node's allocations under joins.
	ListingGap time.Duration
	Metrics    *Metrics // nil: not counted
}

// setDefaults fills what the wiring left unset (tests) from the configs
// defaults: the values live there alone.
func (d *Deps) setDefaults() {
	if d.RefreshInterval > 0 && d.Timeout > 0 && d.MaxBacklog > 0 && d.ListingGap > 0 {
		return
	}
	def := configs.Default()
	d.RefreshInterval = cmp.Or(max(d.RefreshInterval, 0), def.Presence.RefreshInterval)
	d.Timeout = cmp.Or(max(d.Timeout, 0), def.Directory.Timeout)
	d.MaxBacklog = cmp.Or(max(d.MaxBacklog, 0), def.Directory.MaxBacklog)
	d.ListingGap = cmp.Or(max(d.ListingGap, 0), def.Directory.ListingGap)
}

// cmdRankChanged is the command_type of a room's own RoomRankChanged
// commits in the command log.
const cmdRankChanged = "RankChanged"

// node is a node's Deps with its defaults, shared by all its rooms: a
// copy and a client in every room were ~120 bytes of each active room.
type node struct {
	once sync.Once // completes d.Rooms on the first activation
	d    Deps
}

// New returns the directory's observer of each room activation, for the
// grain's Deps.Observers.
func New(d Deps) roomgrain.NewObserver {
	if d.Directory == nil {
		return func(roomgrain.Activation) roomgrain.Observer { return nil }
	}
	return newNode(d).observe
}

func newNode(d Deps) *node {
	n := &node{d: d}
	n.d.setDefaults()
	return n
}

// deps returns the node's Deps, with a room client on the cluster of a
// when it has none, for the switched_room leaves.
func (n *node) deps(a roomgrain.Activation) *Deps {
	n.once.Do(func() {
		if n.d.Rooms == nil && a.Cluster != nil {
			n.d.Rooms = &roomgrain.Client{Cluster: a.Cluster, AttemptTimeout: 3 * time.Second}
		}
	})
	return &n.d
}

// link is a room activation's directory observer, in one allocation with
// its worker (an active room pays for it as long as it lives: six
// allocations were ~900 bytes).
type link struct {
	deps    *Deps // the node's
	room    roomgrain.Room
	worker  worker
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
	// What Committed needs of the state before a command (the grain
	// changes it in place), taken by Applying: the member count and name.
	prevMembers int
	prevName    string
}

var _ roomgrain.Observer = (*link)(nil)

// tell sends the grain a message (a rank change to commit).
func (l *link) tell(m any) { l.root.Send(l.self, m) }

// entryUpdate is a listing entry and the room seq it was taken at.
type entryUpdate struct {
	e   persistence.RoomEntry
	seq int64
}

// observe connects a new activation: makes the worker, registers the
// activation as hosted (Hosted's wheel refreshes it; without Hosted, its
// own timer) and registers the room from its state.
func (n *node) observe(a roomgrain.Activation) roomgrain.Observer {
	d := n.deps(a)
	root, self := a.Root, a.Self
	l := &link{deps: d, room: a.Room, root: root, self: self}
	l.joins.members = a.Room.State().Members
	w := &l.worker
	w.link = l
	log := a.Room.Log()
	w.run.Panicked = func(p any, stack []byte) {
		// The room's next refresh rebuilds whatever the step left undone.
		log.Error("room directory worker panicked; the room's next refresh repairs the directory", "panic", fmt.Sprint(p), "stack", string(stack))
	}
	if d.Hosted != nil {
		d.Hosted.add(a.Room.Key(), self, func(pid *actor.PID) { root.Send(pid, roomgrain.Tick) }, d.RefreshInterval)
		a.Room.TicksEvery(d.RefreshInterval)
	} else {
		l.stop = scheduler.NewTimerScheduler(root).SendRepeatedly(d.RefreshInterval, d.RefreshInterval, self, roomgrain.Tick)
	}
	l.sync()
	return l
}

// Stopped ends the activation's link: on stop and on restart.
func (l *link) Stopped() {
	if l.stop != nil {
		l.stop()
	}
	l.worker.run.Stop() // queued work and a held-back listing write go
	if l.deps.Hosted != nil {
		l.deps.Hosted.remove(l.room.Key(), l.self)
	}
}

// Passivating takes the room off the listing right away (inline: the
// worker's queue is dropped when the grain stops). A room that stops any
// other way (rebalance, shutdown, crash) stays listed until it comes back
// or its entry expires.
func (l *link) Passivating() {
	if !l.room.State().Exists {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.deps.Timeout)
	defer cancel()
	if err := l.deps.Directory.RemoveRoom(ctx, l.room.Key()); err != nil {
		l.deps.Metrics.failed("remove_room")
		l.room.Log().Warn("directory: unlisting passivated room failed; its entry expires", "error", err)
	}
}

// Tick re-registers the room from its state.
func (l *link) Tick() { l.sync() }

// Loaded follows a reload: the worker reads the reloaded members.
func (l *link) Loaded() {
	l.joins.mu.Lock()
	l.joins.members = l.room.State().Members
	l.joins.mu.Unlock()
}

// enqueue hands steps to the worker unless its backlog is full.
func (l *link) enqueue(steps ...func(w *worker)) bool {
	if len(steps) == 0 {
		return false
	}
	if l.backlog.Load() >= l.deps.MaxBacklog {
		l.deps.Metrics.dropped()
		return false
	}
	l.backlog.Add(1)
	w := &l.worker
	if !w.run.Post(func() { w.work(steps) }) {
		l.backlog.Add(-1)
		return false
	}
	return true
}

// sync registers the room from its state (activation and refresh).
func (l *link) sync() {
	s := l.room.State()
	if !l.room.Loaded() || !s.Exists {
		return
	}
	if s.Status == room.StatusClosed {
		l.enqueue(func(w *worker) { w.removeRoom() })
		return
	}
	if !l.syncQueued.CompareAndSwap(false, true) {
		return // the queued one has not started: a refresh is due anyway
	}
	rs := persistence.RoomSync{Entry: l.listing(), Members: l.joins.all(), NowMs: l.room.Now().UnixMilli()}
	seq := s.Seq
	if !l.enqueue(func(w *worker) { w.sync(rs, seq) }) {
		l.syncQueued.Store(false)
	}
}

// listing is the room's listing entry, from its state.
func (l *link) listing() persistence.RoomEntry {
	s := l.room.State()
	e := persistence.RoomEntry{
		AppCode: s.AppCode, RoomID: s.RoomID, Name: s.Name, OwnerUserID: s.Owner,
		MemberCount: int64(len(s.Members)), Heat: s.Heat, UpdatedAtMs: l.room.Now().UnixMilli(),
	}
	if m := s.Metadata(); m.Category != "" || m.Tags != nil || m.CoverURL != "" || m.Visibility != "" {
		// Tags is shared read-only: a change replaces the slice (setMeta).
		e.Meta = &persistence.RoomMeta{Category: m.Category, Tags: m.Tags, CoverURL: m.CoverURL, Visibility: m.Visibility}
	}
	return e
}

// Passed refreshes presence after a heartbeat passed Decide.
func (l *link) Passed(cmd room.Command) {
	if cmd.Type != room.CmdHeartbeat {
		return
	}
	user, now := cmd.UserID, cmd.NowMs
	l.enqueue(func(w *worker) { w.heartbeat(user, now) })
}

// Check runs before a switched_room leave is decided: if the user joined
// this room again after the join that sent the leave (staleLeave), or the
// directory says they are back in this room, the leave is stale and
// refused. A directory that cannot answer does not hold the leave back.
func (l *link) Check(cmd room.Command) error {
	if cmd.Type != room.CmdLeaveRoom || cmd.Reason != room.ReasonSwitchedRoom {
		return nil
	}
	if l.staleLeave(cmd) {
		return fmt.Errorf("%w: user %s joined this room again after the join that displaced them", errclass.Precondition, cmd.UserID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.deps.Timeout)
	defer cancel()
	ur, err := l.deps.Directory.UserRoom(ctx, cmd.AppCode, cmd.UserID)
	if err != nil {
		if !errors.Is(err, persistence.ErrNotFound) {
			l.deps.Metrics.failed("user_room")
		}
		return nil
	}
	if ur.RoomID == l.room.Key().RoomID {
		return fmt.Errorf("%w: user %s is back in this room", errclass.Precondition, cmd.UserID)
	}
	return nil
}

// staleLeave reports whether a switched_room leave ends a membership newer
// than the join that displaced it: the user joined this room again after
// that join, and the leave is refused. The bound is part of the leave's
// derived command_id (leaveID); a command_id of another shape has none.
func (l *link) staleLeave(cmd room.Command) bool {
	if cmd.Type != room.CmdLeaveRoom || cmd.Reason != room.ReasonSwitchedRoom {
		return false
	}
	upTo, ok := leaveBound(cmd.CommandID)
	if !ok {
		return false
	}
	at, member := l.joins.at(cmd.UserID)
	return member && at > upTo
}

// Applying notes the state before the command and takes the members'
// lock: the worker reads the member map the grain is about to change in
// place.
func (l *link) Applying([]room.Event) {
	s := l.room.State()
	l.prevMembers, l.prevName = len(s.Members), s.Name
	l.joins.mu.Lock()
}

// Committed publishes the members after the command and queues its
// directory work; prevMembers and prevName are of the state before it,
// State is the state after.
func (l *link) Committed(cmd room.Command, events []room.Event) {
	s := l.room.State()
	var closing []string
	if slices.ContainsFunc(events, func(e room.Event) bool { _, ok := e.(room.RoomClosed); return ok }) {
		// RoomClosed drops the member map whole, so the one the worker
		// read until now still holds the members it sends away.
		closing = slices.Sorted(maps.Keys(l.joins.members))
	}
	l.joins.members = s.Members
	l.joins.mu.Unlock()
	prevMembers, prevName := l.prevMembers, l.prevName
	if cmd.Type == cmdRankChanged {
		l.deps.Metrics.rankChanged()
	}
	var steps []func(w *worker)
	updating := false
	rejoined := l.joins.rejoined // written by this goroutine only
	joined := false
	listed := false
	for _, ev := range events {
		switch e := ev.(type) {
		case room.RoomCreated:
			listed = true
		case room.RoomUserJoined:
			joined = joined || e.UserID == cmd.UserID
			user, at, cmdID := e.UserID, e.JoinedAtMs, cmd.CommandID
			steps = append(steps, func(w *worker) { w.join(user, at, cmdID) })
		case room.RoomUserLeft:
			user := e.UserID
			rejoined = without(rejoined, user)
			steps = append(steps, func(w *worker) { w.clear(user) })
		case room.RoomUserKicked:
			user := e.TargetUserID
			rejoined = without(rejoined, user)
			steps = append(steps, func(w *worker) { w.clear(user) })
		case room.RoomHeatChanged, room.RoomMetadataChanged:
			listed = true
		case room.RoomClosed:
			for _, u := range closing {
				steps = append(steps, func(w *worker) { w.clear(u) })
			}
			steps = append(steps, func(w *worker) { w.removeRoom() })
		}
	}
	// Joining a room one is already in is a no-op for the room but says
	// "this is my room now": a user who drifted into two rooms picks one.
	if cmd.Type == room.CmdJoinRoom && !joined && s.IsMember(cmd.UserID) {
		user, at, cmdID := cmd.UserID, cmd.NowMs, cmd.CommandID
		rejoined = maps.Clone(rejoined)
		if rejoined == nil {
			rejoined = map[string]int64{}
		}
		rejoined[user] = at
		steps = append(steps, func(w *worker) { w.join(user, at, cmdID) })
	}
	if s.Status == room.StatusClosed {
		rejoined = nil
	}
	// Published before the reply: a join elsewhere that follows this
	// command is written only after the worker can see it (worker.join).
	// The members were published above, under the same lock.
	l.joins.setRejoined(rejoined)
	if s.Status == room.StatusOpen && (listed || prevMembers != len(s.Members) || prevName != s.Name) {
		if l.entry.Swap(&entryUpdate{e: l.listing(), seq: s.Seq}) == nil {
			updating = true
			steps = append(steps, func(w *worker) { w.update() })
		}
	}
	if !l.enqueue(steps...) && updating {
		l.entry.Store(nil) // dropped with its step: the refresh redoes it
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

// rankChanged asks the room to commit RoomRankChanged for a rank the
// worker read after seq.
func (l *link) rankChanged(seq int64, rc persistence.RankChange, heat int64) {
	l.tell(&roomgrain.Commit{
		Type:      cmdRankChanged,
		CommandID: fmt.Sprintf("%s%d-%d-%d", room.RankIDPrefix, seq, rc.Prev, rc.Rank),
		Events:    []room.Event{room.RoomRankChanged{Rank: rc.Rank, PrevRank: rc.Prev, Heat: heat}},
	})
}
