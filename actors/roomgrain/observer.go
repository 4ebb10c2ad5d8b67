package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
	"unsafe"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
)

// Observer follows one activation of a room: what it loads, checks and
// commits, and its end. Read models of the room (the room directory,
// actors/directory) keep in step with it through these calls and nothing
// else. Every call is made on the room's goroutine, so an observer reads
// the room (Room) there without a lock; anything slow belongs on a queue
// of its own (Serial). Only Check can change a command's outcome.
type Observer interface {
	// Loaded: the state was loaded again from the store (a reload after an
	// append whose outcome was unknown, or that was fenced), replacing
	// State's member map.
	Loaded()
	// Check runs before a command that changes the room is decided; an
	// error refuses the command.
	Check(cmd room.Command) error
	// Passed: a command that changes nothing (a heartbeat) passed Decide.
	Passed(cmd room.Command)
	// Applying: cmd's events are stored and about to change the state in
	// place; Committed follows at once, with the state after them.
	Applying(events []room.Event)
	Committed(cmd room.Command, events []room.Event)
	// Tick: Tick reached the room, and its state is loaded.
	Tick()
	// Passivating: the room stops for being idle; Stopped follows.
	Passivating()
	// Stopped: the activation ended (stop, restart); no call follows.
	Stopped()
}

// Explainer is an Observer that adds what it knows to a refusal of a
// command (when and why its user left the room): Explain returns err
// enriched, or as it is. The grain asks every observer that is one, in
// order, for each refused command.
type Explainer interface {
	Explain(cmd room.Command, err error) error
}

// Receiver is an Observer with messages of its own sent to the room (a
// read of its log, a subscription, its own timer's): the grain hands it
// every message it does not know, on the room's goroutine, and it
// answers whether the message was its own. A request no observer takes
// is refused at once (a node wired without the observer that owns it),
// not left to its caller's timeout.
type Receiver interface {
	Receive(ctx actor.Context) (own bool)
}

// Stopper is an Observer with work to finish while its room can still
// commit (an open window of likes): Stopping is called first when the
// activation stops (passivation, rebalance, shutdown), before its
// snapshot is flushed and its publisher ends; Stopped follows.
type Stopper interface {
	Stopping(ctx actor.Context)
}

// Recorder is an Observer that follows the command log itself (the
// room's feed): Recorded gets each stored command's envelopes, after
// Committed, on the room's goroutine. It must not change them.
type Recorder interface {
	Recorded(seq int64, envs []persistence.Envelope)
}

// CommandLog is the room's command log, as an observer reads it (the
// room's database's).
type CommandLog interface {
	LoadCommands(ctx context.Context, key persistence.RoomKey, afterSeq int64) ([]persistence.CommandRecord, error)
}

// NewObserver makes the observer of a starting activation (its state is
// loaded if the store answered); nil: none. Deps.Observers lists them.
type NewObserver func(a Activation) Observer

// Activation is a starting activation, as its observers get it.
type Activation struct {
	Room Room
	Self *actor.PID // the grain
	Root *actor.RootContext
	// Cluster is the cluster the room was activated in; nil where grains
	// are hosted without one (tests).
	Cluster *cluster.Cluster
}

// Room is a room activation as its observers read it. State, Loaded and
// Now read the grain's live fields: call them on the room's goroutine (in
// an Observer call); Key and Log never change and may be read anywhere.
type Room struct{ g *grain }

// Key is the room's key.
func (r Room) Key() persistence.RoomKey { return r.g.key() }

// Identity is the room's grain identity, "<app_code>/<room_id>".
func (r Room) Identity() string { return r.g.identity }

// CommandLog is the command log of the room's database (a store that
// also reads bounded ranges offers LoadCommandRange too).
func (r Room) CommandLog() CommandLog { return r.g.deps.Store }

// Ready makes the room ready to answer a message an observer owns, as
// it is for a command: the node must hold the room's lease (an error
// says it moved), and its state is loaded if it was not (an error in
// the unavailable class when the store does not answer). Call it in
// Receive.
func (r Room) Ready(ctx actor.Context) error {
	g := r.g
	if err := g.gate(ctx); err != nil {
		return err
	}
	if g.loaded {
		return nil
	}
	if err := g.load(); err != nil {
		if errors.Is(err, errMoved) {
			return err
		}
		g.log.Warn("room load failed", "error", err)
		return fmt.Errorf("%w: room state could not be loaded", errclass.Unavailable)
	}
	return nil
}

// ReadyToWrite is Ready for a write the observer is about to decide: the
// state is also loaded again when an append's outcome is unknown, as
// before any command's write; reloaded says it was. Call it in Receive.
func (r Room) ReadyToWrite(ctx actor.Context) (reloaded bool, err error) {
	g := r.g
	if err := g.gate(ctx); err != nil {
		return false, err
	}
	if g.loaded && !g.unsure {
		return false, nil
	}
	return true, g.reload()
}

// RecentlyUsed reports whether cmd's command_id is a command's the room
// ran lately (its recent ids; older ones are not looked up), stored
// under another request.
func (r Room) RecentlyUsed(cmd room.Command) bool {
	if !r.g.recent.has(cmd.CommandID) {
		return false
	}
	_, err := r.g.recorded(cmd)
	return err == nil || errors.Is(err, errclass.Exists)
}

// RecentID reports whether commandID is among the room's recent
// command ids at all: a map lookup, so an observer can ask it of every
// message and call RecentlyUsed (which reads the command's record) only
// for those it names.
func (r Room) RecentID(commandID string) bool { return r.g.recent.has(commandID) }

// Explain is a refusal of cmd as the room's observers explain it
// (Explainer), as a client's refused command is.
func (r Room) Explain(cmd room.Command, err error) error { return r.g.explain(cmd, err) }

// Log is the room's logger.
func (r Room) Log() *slog.Logger { return r.g.log }

// State is the room's state, changed in place by each commit: read it,
// never change it.
func (r Room) State() *room.State { return &r.g.state }

// Loaded reports whether the state was loaded (the store answered).
func (r Room) Loaded() bool { return r.g.loaded }

// Now is the node's clock.
func (r Room) Now() time.Time { return r.g.deps.Clock() }

// TicksEvery says that the observer sends the room Tick every d from
// outside it (the node's refresh wheel). A room whose idle timeout is at
// least d then checks its idleness on those ticks and keeps no timer of
// its own: passivation comes up to d late, and Proto.Actor's receive
// timeout (~140 bytes a room, reset on every message) is not armed.
// Called from NewObserver.
func (r Room) TicksEvery(d time.Duration) {
	if d > 0 && r.g.deps.Config.IdleTimeout >= d {
		r.g.idleByWheel = true
	}
}

// Tick is the periodic message an observer has a room sent (its directory
// refresh). It does not keep an idle room from passivating.
var Tick any = &tick{}

type tick struct{}

func (*tick) NotInfluenceReceiveTimeout() {}

// Commit asks the room to commit events an observer learned outside it
// (the directory's rank): through the command path (command log, outbox,
// publish), only while the room is loaded and open, and once per
// CommandID. A failure is logged; nothing answers the sender.
type Commit struct {
	Type      string // the command_type in the command log
	CommandID string
	Events    []room.Event
}

func (*Commit) NotInfluenceReceiveTimeout() {}

// observe makes the activation's observers (Deps.Observers).
func (g *grain) observe(ctx actor.Context, c *cluster.Cluster) {
	if len(g.deps.Observers) == 0 {
		return
	}
	a := Activation{Room: Room{g}, Self: ctx.Self(), Root: ctx.ActorSystem().Root, Cluster: c}
	list := make([]Observer, 0, min(len(g.deps.Observers), math.MaxUint8))
	for _, newObserver := range g.deps.Observers {
		if o := newObserver(a); o != nil && len(list) < cap(list) {
			list = append(list, o)
		}
	}
	if len(list) > 0 {
		g.obs, g.nobs = &list[0], uint8(len(list))
	}
}

// observers is the activation's observers, in Deps.Observers order. The
// grain keeps their array's first element and their count, which fits
// in the grain's padding: a slice header would take the grain past its
// size class (grainsize_test.go), and a pointer to one is an allocation
// more per room.
func (g *grain) observers() []Observer {
	if g.obs == nil {
		return nil
	}
	return unsafe.Slice(g.obs, g.nobs)
}

// stopObservers ends the activation's observers: on stop and on restart
// (a restarted grain makes new ones in its ClusterInit).
func (g *grain) stopObservers() {
	for _, o := range g.observers() {
		o.Stopped()
	}
	g.obs, g.nobs = nil, 0
}

// Commit commits a command the observer decided on the room's state in
// Receive (the room's own command, such as a seat request's expiry):
// through the command path (command log, outbox, publish, observers),
// as a client's command. Call it in Receive, after Ready.
func (r Room) Commit(ctx actor.Context, cmd room.Command, events []room.Event) error {
	_, err := r.g.commit(ctx, cmd, events)
	return err
}

// CommitReply is Commit, with the reply a client's command would get.
func (r Room) CommitReply(ctx actor.Context, cmd room.Command, events []room.Event) (*v1.CommandReply, error) {
	return r.g.commit(ctx, cmd, events)
}

// explain lets the observers say more about a refusal (Explainer).
func (g *grain) explain(cmd room.Command, err error) error {
	for _, o := range g.observers() {
		if e, ok := o.(Explainer); ok {
			err = e.Explain(cmd, err)
		}
	}
	return err
}

// stopping lets the observers that still commit finish (Stopper).
func (g *grain) stopping(ctx actor.Context) {
	for _, o := range g.observers() {
		if s, ok := o.(Stopper); ok {
			s.Stopping(ctx)
		}
	}
}

// receiveObserved hands a message the grain does not know to its
// observers that take messages.
func (g *grain) receiveObserved(ctx actor.Context) {
	for _, o := range g.observers() {
		if r, ok := o.(Receiver); ok && r.Receive(ctx) {
			return
		}
	}
	if _, system := ctx.Message().(actor.SystemMessage); ctx.Sender() != nil && !system {
		ctx.Respond(&v1.RoomResponse{Error: roomError(fmt.Errorf("%w: room %s takes no %T on this node", errclass.Unavailable, g.identity, ctx.Message()))})
	}
}

// logged hands a stored command's envelopes to the observers that follow
// the log.
func (g *grain) logged(seq int64, envs []persistence.Envelope) {
	for _, o := range g.observers() {
		if r, ok := o.(Recorder); ok {
			r.Recorded(seq, envs)
		}
	}
}

// commitObserved commits an observer's Commit.
func (g *grain) commitObserved(ctx actor.Context, m *Commit) {
	if !g.loaded || !g.state.Exists || g.state.Status != room.StatusOpen || g.recent.has(m.CommandID) {
		return
	}
	k := g.key()
	cmd := room.Command{Type: m.Type, CommandID: m.CommandID, AppCode: k.AppCode, RoomID: k.RoomID, NowMs: g.deps.Clock().UnixMilli()}
	if _, err := g.commit(ctx, cmd, m.Events); err != nil {
		g.log.Warn("observer's command not committed", "command_type", m.Type, "command_id", m.CommandID, "error", err)
	}
}
