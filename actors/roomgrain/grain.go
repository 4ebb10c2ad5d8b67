package roomgrain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hyapp/roomcell/actors/outboxmarks"
	"github.com/hyapp/roomcell/actors/storegate"
	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// Kind is the cluster kind of room grains; identities are
// "<app_code>/<room_id>".
const Kind = "room"

// Store is what a room grain needs from persistence.
type Store interface {
	persistence.RoomStore
	MarkOutboxPublished(ctx context.Context, eventID string, nowMs int64) error
	// The room's publisher marks what it sent in batches
	// (actors/outboxmarks).
	MarkOutboxPublishedBatch(ctx context.Context, eventIDs []string, nowMs int64) error
	// The room's publisher catching up (publisher.go).
	ClaimRoomOutbox(ctx context.Context, key persistence.RoomKey, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error)
	// Rows a publisher gives back unsent, in one write.
	ReleaseOutboxBatch(ctx context.Context, eventIDs []string) error
}

// JoinOrder gives one user's joins on a node strictly increasing times
// (the room directory settles a user found in two rooms by join time).
type JoinOrder interface {
	Next(app, user string, nowMs int64) int64
}

// Deps is what every room grain of a node shares. The node's services
// (store gate, join order, observers) are made once by its wiring and
// passed in: nothing here builds one.
type Deps struct {
	Store     Store
	Publisher delivery.Publisher
	Gifts     GiftDebiter
	Config    configs.RoomConfig
	Logger    *slog.Logger
	Clock     func() time.Time
	// NodeID is this process's node_id, for the publisher's log lines.
	NodeID string
	// MaxPublishBacklog: above this many events waiting in a room's
	// publisher, new events are left to the outbox relay alone, so an IM
	// outage cannot grow a mailbox without bound.
	MaxPublishBacklog int64
	// Observers make each activation's observers (observer.go), such as
	// the room directory's; called in order on every activation.
	Observers []NewObserver
	// PublishMetrics: nil means none.
	PublishMetrics *PublishMetrics
	// Marks batches the publishers' marks (actors/outboxmarks: one per
	// room database of the node, made by the node's wiring); nil gives
	// each room's publisher its own.
	Marks *outboxmarks.Batcher
	// Joins orders one user's joins on this node (the room directory's
	// directory.JoinClock, one per node); nil: not ordered.
	Joins JoinOrder
	// Guesses are the password-guess buckets (password.go), handed by
	// the node's wiring; nil: a join that needs the password is refused.
	Guesses PasswordGuesses
	// Lease gates every answer on the node's lease of the room (lease.go);
	// nil: always served, appends not fenced by epoch.
	Lease Lease
	// StoreGate gates the rooms' store calls on whether the store
	// answers (actors/storegate: one per room database of the node, made
	// by the node's wiring); nil: every call goes to the store.
	StoreGate *storegate.Gate
	// pick, set by ShardedGrainProps, is the Deps of a room's database,
	// chosen by the room's identity when it starts (shards.go).
	pick func(identity string) *Deps
}

func (d *Deps) setDefaults() {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if d.MaxPublishBacklog <= 0 {
		d.MaxPublishBacklog = 1000
	}
}

// GrainProps is a room grain without the cluster's middleware: a test
// hosts grains itself by spawning these and sending each a ClusterInit.
func GrainProps(d Deps) *actor.Props {
	d.setDefaults()
	// Every grain of the kind reads the one Deps: a copy per room was
	// ~300 bytes of each active room.
	return grainProps(&d)
}

func grainProps(shared *Deps) *actor.Props {
	// The lock-free mailbox: two small queues, where the default one starts
	// a ring of ten slots for user messages (~200 bytes a room).
	return actor.PropsFromProducer(func() actor.Actor { return &grain{deps: shared} },
		actor.WithDispatcher(roomDispatcher), actor.WithMailbox(actor.UnboundedLockfree()))
}

// recentIDs bounds the in-memory command_id cache; older ids are found
// through the store's command_id fence.
const recentIDs = 4096

type grain struct {
	deps *Deps
	// identity is "<app_code>/<room_id>" (the room's key as one string,
	// without an allocation per command); key() reads it back.
	identity string
	state    room.State
	snapSeq  int64          // seq of the newest stored snapshot
	recent   recentCommands // command_ids of this activation and the replayed tail
	pub      *pubLink       // publisher.go
	log      *slog.Logger
	obs      *Observer    // the first of nobs observers (observer.go)
	epoch    int64        // lease epoch the state was loaded under (lease.go)
	read     *roomReads   // GetRoom's member order and kept answer, from the first read (reads.go)
	view     *viewProcess // the kept answer published to this node's clients (view.go); nil: none
	// idleByWheel: the room passivates on an observer's ticks (the
	// node's refresh wheel; startIdle); lastActiveMs is when it last had a message that keeps
	// a room active.
	lastActiveMs int64
	idleByWheel  bool
	loaded       bool
	// unsure: an append failed without an answer from the store (it may
	// have committed): reads answer from the state, which holds every
	// acknowledged write, but the next write reloads first.
	unsure bool
	nobs   uint8 // observers at obs
	// snapTried: the last snapshot tried was at snapSeq + snapTried
	// (snapshot.go), so one the store refused is tried again
	// SnapshotEvery commands later, not on every message. 32 bits, in
	// the padding after the flags: the grain keeps its size class.
	snapTried uint32
}

// key is the room's key: identity's two halves (no copies). A field of
// its own was 32 bytes of every active room, and with it the grain fell
// in the next size class up.
func (g *grain) key() persistence.RoomKey {
	app, roomID, _ := strings.Cut(g.identity, "/")
	return persistence.RoomKey{AppCode: app, RoomID: roomID}
}

func (g *grain) Receive(ctx actor.Context) {
	if g.idleByWheel {
		if _, quiet := ctx.Message().(actor.NotInfluenceReceiveTimeout); !quiet {
			g.lastActiveMs = g.deps.Clock().UnixMilli()
		}
	}
	switch msg := ctx.Message().(type) {
	case *cluster.ClusterInit:
		if g.deps.pick != nil {
			g.deps = g.deps.pick(msg.Identity.Identity) // its database's (shards.go)
		}
		g.init(ctx, msg.Identity.Identity)
		g.observe(ctx, msg.Cluster)
		g.startIdle(ctx)
	case *v1.RoomCommand:
		if _, ok := msg.GetCommand().(*v1.RoomCommand_LikeRoom); ok {
			// Gathered into windows by an observer (actors/roomlikes),
			// answered when its window is stored.
			g.receiveObserved(ctx)
			break
		}
		ctx.Respond(g.handle(ctx, msg))
		// A room nobody created holds nothing worth keeping: stop now
		// rather than at the idle timeout, so random ids cannot pin
		// actors. Commands already queued are still answered first.
		if g.loaded && !g.state.Exists {
			ctx.Poison(ctx.Self())
		}
	case *actor.ReceiveTimeout:
		g.passivate(ctx)
	case *actor.Stopping:
		// Passivation, rebalance and cluster shutdown all pass here. What
		// observers still commit (an open like window) is written first,
		// so its likes are answered.
		g.closeView()
		g.stopping(ctx)
		g.flushSnapshot()
		g.stopPublisher()
		g.stopObservers()
	case *actor.Restarting:
		g.closeView()
		g.stopPublisher()
		g.stopObservers()
	case *tick:
		if g.idleByWheel && g.deps.Clock().UnixMilli()-g.lastActiveMs >= g.deps.Config.IdleTimeout.Milliseconds() {
			g.passivate(ctx)
			return
		}
		if !g.loaded && g.load() != nil {
			return // the store is away too; the next tick or command retries
		}
		for _, o := range g.observers() {
			o.Tick()
		}
	case *Commit:
		g.commitObserved(ctx, msg)
	default:
		g.receiveObserved(ctx) // an observer's own messages (observer.go)
	}
	g.snapshotIfDue() // after the reply: snapshot.go
}

// startIdle arms the room's passivation after Config.IdleTimeout without
// a command. A room an observer sends Tick at most that far apart
// (Room.TicksEvery: the node's refresh wheel) checks its idleness on each
// tick instead: passivation comes up to one interval late (10 min 30 s at
// the defaults) but the room keeps no timer of its own. Any other room
// keeps Proto.Actor's receive timeout.
func (g *grain) startIdle(ctx actor.Context) {
	if g.idleByWheel {
		g.lastActiveMs = g.deps.Clock().UnixMilli()
		return
	}
	ctx.SetReceiveTimeout(g.deps.Config.IdleTimeout)
}

// passivate stops an idle room: its snapshot first, and out of the listing.
func (g *grain) passivate(ctx actor.Context) {
	// A room read from its view (view.go) is active, as if the reads had
	// reached its mailbox.
	if g.loaded && (g.state.NextSeatDeadline() != 0 || g.viewReadWithin(g.deps.Clock().UnixMilli(), g.deps.Config.IdleTimeout.Milliseconds())) {
		// A pending seat request keeps its room active until it ends (at
		// most room.MaxSeatRequestSeconds): its expiry is the room's own
		// command, and a passive room commits nothing. The receive
		// timeout cancels itself when it fires: set it again.
		if !g.idleByWheel {
			ctx.SetReceiveTimeout(g.deps.Config.IdleTimeout)
		}
		return
	}
	g.flushSnapshot()
	for _, o := range g.observers() {
		o.Passivating()
	}
	ctx.Poison(ctx.Self())
}

func (g *grain) init(ctx actor.Context, identity string) {
	g.identity = identity
	g.log = roomLogger(g.deps.Logger, g.key())
	g.startPublisher()
	if err := g.load(); err != nil {
		g.log.Warn("room load failed; will retry on next command", "error", err)
	}
}

func (g *grain) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), g.deps.Config.StoreTimeout)
}

// storeCall runs one store call of the grain through its database's
// gate.
func (g *grain) storeCall(call func(ctx context.Context) error) error {
	return g.deps.StoreGate.Call(g.deps.Config.StoreTimeout, call)
}

// load rebuilds the state from the newest snapshot plus the events
// recorded after it. Commands are never re-executed.
func (g *grain) load() error {
	return g.storeCall(g.loadIn)
}

func (g *grain) loadIn(ctx context.Context) error {
	// Everything is read into locals and replaces the grain's only once
	// the whole load succeeded: a reload the store did not answer (a
	// paused database, a closed gate) leaves the state, its epoch and its
	// recent commands as they were, so reads go on answering from it.
	epoch, err := g.claim(ctx)
	if err != nil {
		return err
	}
	k := g.key()
	s := room.NewState(k.AppCode, k.RoomID)
	var snapSeq int64
	snap, err := g.deps.Store.LoadSnapshot(ctx, k)
	switch {
	case err == nil:
		if s, err = room.UnmarshalState(snap.State); err != nil {
			return fmt.Errorf("decode snapshot at seq %d: %w", snap.Seq, err)
		}
		snapSeq = snap.Seq
	case !errors.Is(err, persistence.ErrNotFound):
		return err
	}
	recs, err := g.deps.Store.LoadCommands(ctx, k, s.Seq)
	if err != nil {
		return err
	}
	var recent recentCommands
	for _, r := range recs {
		evs, err := persistence.DecodeEvents(r.Events)
		if err == nil {
			err = room.Unseal(evs, r.Sealed) // what the events carried beside their payloads
		}
		if err != nil {
			return fmt.Errorf("seq %d: %w", r.Seq, err)
		}
		s.ApplyInPlace(r.Seq, evs)
		recent.add(r.CommandID)
	}
	g.state, g.loaded, g.unsure, g.epoch = s, true, false, epoch
	g.snapSeq, g.snapTried, g.recent = snapSeq, 0, recent
	g.read = nil // a reload: reads start again from the state loaded
	g.dropView()
	for _, o := range g.observers() { // a reload: observers follow it
		o.Loaded()
	}
	return nil
}

// reload loads the state for a command, as the caller's error.
func (g *grain) reload() error {
	if err := g.load(); err != nil {
		if errors.Is(err, errMoved) || errors.Is(err, storegate.ErrDown) {
			return err
		}
		g.log.Warn("room load failed", "error", err)
		return fmt.Errorf("%w: room state could not be loaded", errclass.Unavailable)
	}
	return nil
}

func (g *grain) handle(ctx actor.Context, rc *v1.RoomCommand) *v1.RoomResponse {
	traceparent, end := grainSpan(rc) // tracing.go
	err := g.gate(ctx)
	if err == nil {
		var reply *v1.CommandReply
		if reply, err = g.execute(ctx, rc, traceparent); err == nil {
			end(nil)
			return &v1.RoomResponse{Reply: reply}
		}
	}
	end(err)
	return &v1.RoomResponse{Error: roomError(err)}
}

func (g *grain) execute(ctx actor.Context, rc *v1.RoomCommand, traceparent string) (reply *v1.CommandReply, err error) {
	// A read answers from the state while an append's outcome is unknown
	// (g.unsure); anything else reloads first.
	_, isGet := rc.GetCommand().(*v1.RoomCommand_GetRoom)
	_, isBans := rc.GetCommand().(*v1.RoomCommand_ListBans)
	_, isTicket := rc.GetCommand().(*v1.RoomCommand_GetJoinTicket)
	_, isRanks := rc.GetCommand().(*v1.RoomCommand_ListContributors)
	if !g.loaded || (g.unsure && !isGet && !isBans && !isTicket && !isRanks) {
		if err := g.reload(); err != nil {
			return nil, err
		}
	}
	if get, ok := rc.GetCommand().(*v1.RoomCommand_GetRoom); ok {
		return g.getRoom(ctx, get.GetRoom)
	}
	if l, ok := rc.GetCommand().(*v1.RoomCommand_ListBans); ok {
		return g.listBans(l.ListBans)
	}
	if l, ok := rc.GetCommand().(*v1.RoomCommand_ListContributors); ok {
		return g.listContributors(l.ListContributors)
	}
	if j, ok := rc.GetCommand().(*v1.RoomCommand_GetJoinTicket); ok {
		// A read of the rights; the node that answers the client signs.
		rights, err := room.JoinRightsOf(g.state, j.GetJoinTicket.GetUserId(), g.deps.Clock().UnixMilli())
		if err != nil {
			return nil, err
		}
		return &v1.CommandReply{RoomSeq: g.state.Seq, JoinRights: rights.Proto()}, nil
	}
	cmd, ok := room.CommandFromProto(rc, g.deps.Clock().UnixMilli())
	if !ok {
		return nil, errclass.Invalidf("empty command")
	}
	cmd.TraceParent = traceparent
	defer func() {
		// An observer may say more (a user no longer in the room is told
		// when and why they left: actors/departures).
		if err != nil {
			err = g.explain(cmd, err)
		}
	}()
	k := g.key()
	if app, roomID := room.KeyOf(rc); app != k.AppCode || roomID != k.RoomID {
		return nil, errclass.Invalidf("command for %s/%s sent to room %s", app, roomID, k)
	}
	cmd.MaxMembers = g.deps.Config.MaxMembers
	// The password leaves the command here: nothing after sees it.
	guessKey, err := g.passwordEdge(&cmd)
	if err != nil {
		return nil, err
	}
	if cmd.Type == room.CmdSendGift {
		cmd.Day = g.rankDay(cmd.NowMs)
	}
	if cmd.Type == room.CmdJoinRoom && g.deps.Joins != nil {
		cmd.NowMs = g.deps.Joins.Next(cmd.AppCode, cmd.UserID, cmd.NowMs)
	}
	if room.Mutates(cmd.Type) {
		var err error
		if cmd.RequestHash, err = room.RequestHash(rc); err != nil {
			return nil, err
		}
	}
	if !room.Mutates(cmd.Type) {
		if _, err := room.Decide(g.state, cmd); err != nil {
			return nil, err
		}
		for _, o := range g.observers() {
			o.Passed(cmd)
		}
		return &v1.CommandReply{RoomSeq: g.state.Seq, Room: room.Summary(g.state)}, nil
	}
	if g.recent.has(cmd.CommandID) {
		return g.recorded(cmd)
	}
	for _, o := range g.observers() {
		if err := o.Check(cmd); err != nil {
			return nil, err
		}
	}
	events, err := room.Decide(g.state, cmd)
	if errors.Is(err, room.ErrWrongPassword) && guessKey != "" {
		g.wrongGuess(guessKey)
	}
	if err != nil {
		// A retry of an old command can break a rule that its first run
		// did not (CreateRoom twice): answer it from the log if it is there.
		if reply, dupErr := g.recorded(cmd); dupErr == nil || errors.Is(dupErr, errclass.Exists) {
			return reply, dupErr
		}
		return nil, err
	}
	if cmd.Type == room.CmdSendGift {
		// A key older than the cached ones is looked up before any money
		// moves: its reuse must not reach the wallet.
		if reply, dupErr := g.recorded(cmd); dupErr == nil || errors.Is(dupErr, errclass.Exists) {
			return reply, dupErr
		} else if !errors.Is(dupErr, persistence.ErrNotFound) {
			return nil, dupErr
		}
		return g.sendGift(ctx, cmd)
	}
	return g.commit(ctx, cmd, events)
}

// listBans answers ListBans: one page of the bans in force.
func (g *grain) listBans(r *v1.ListBansRequest) (*v1.CommandReply, error) {
	if !g.state.Exists {
		return nil, room.ErrRoomNotFound
	}
	p, err := room.ParseBansPage(r)
	if err != nil {
		return nil, err
	}
	bans, next := room.BansPage(g.state, g.deps.Clock().UnixMilli(), p)
	return &v1.CommandReply{RoomSeq: g.state.Seq, Bans: bans, NextPageToken: next}, nil
}

// recorded returns the stored reply of cmd's command_id, marked
// duplicate, or ErrExists if the command_id was recorded for a different
// request: a key names one command, and a second command under it would
// otherwise be dropped while its caller is told it happened.
func (g *grain) recorded(cmd room.Command) (*v1.CommandReply, error) {
	commandID := cmd.CommandID
	var rec persistence.CommandRecord
	err := g.storeCall(func(ctx context.Context) (err error) {
		rec, err = g.deps.Store.FindCommand(ctx, g.key(), commandID)
		return err
	})
	if err != nil {
		if errors.Is(err, persistence.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errclass.Unavailable, err)
	}
	// Rows written before fingerprints were stored have none to compare.
	if rec.RequestHash != "" && rec.RequestHash != cmd.RequestHash {
		if rec.CommandType != cmd.Type {
			return nil, fmt.Errorf("%w: command_id %q was already used for a %s, this is a %s", errclass.Exists, commandID, rec.CommandType, cmd.Type)
		}
		return nil, fmt.Errorf("%w: command_id %q was already used for a %s with different fields", errclass.Exists, commandID, rec.CommandType)
	}
	var reply v1.CommandReply
	if err := proto.Unmarshal(rec.Reply, &reply); err != nil {
		return nil, fmt.Errorf("decode recorded reply of %s: %w", commandID, err)
	}
	reply.Duplicate = true
	if len(reply.EventIds) == 0 && len(rec.Events) > 0 {
		// Stored as its seq alone (commit): the events are the log row's.
		reply.EventIds, reply.Events = replyEvents(rec.Events)
	}
	if rec.CommandType == room.CmdCreateRoom {
		reply.ImGroupReady = g.groupReady(rec)
	}
	if reply.Room == nil && g.state.Exists {
		// Recorded without a view (commit): the room as it is now, which
		// includes the command's effect.
		reply.Room = room.Summary(g.state)
	}
	return &reply, nil
}

// encodeEvent is an event's payload: its own JSON when it carries it
// (room.Encoded: a window of likes packed off the room's goroutine),
// else encoding/json's.
func encodeEvent(ev room.Event) ([]byte, error) {
	if e, ok := ev.(room.Encoded); ok {
		if b := e.EncodedJSON(); b != nil {
			return b, nil
		}
	}
	return json.Marshal(ev)
}

func (g *grain) commit(ctx actor.Context, cmd room.Command, events []room.Event) (*v1.CommandReply, error) {
	seq := g.state.Seq + 1
	envs := make([]persistence.Envelope, len(events))
	for i, ev := range events {
		payload, err := encodeEvent(ev)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", ev.EventType(), err)
		}
		envs[i] = persistence.Envelope{
			EventID: room.EventID(cmd.AppCode, cmd.RoomID, seq, i), EventType: ev.EventType(), AppCode: cmd.AppCode, RoomID: cmd.RoomID,
			RoomSeq: seq, CommandID: cmd.CommandID, RequestID: cmd.RequestID, CreatedAtMs: cmd.NowMs, Payload: payload,
			TraceParent: cmd.TraceParent,
		}
	}
	// The stored reply is the command's seq alone: its events are the log
	// row's own, and the room summary is rebuilt from state when a
	// duplicate is answered (recorded). Storing the events a second time
	// in the reply was a third of what the dev store kept per room.
	replyBytes, err := proto.Marshal(&v1.CommandReply{RoomSeq: seq})
	if err != nil {
		return nil, err
	}
	a := persistence.Append{Command: persistence.CommandRecord{
		AppCode: cmd.AppCode, RoomID: cmd.RoomID, Seq: seq, CommandID: cmd.CommandID,
		CommandType: cmd.Type, RequestHash: cmd.RequestHash, Reply: replyBytes, Events: envs, CreatedAtMs: cmd.NowMs,
		Sealed: room.SealedOf(events),
	}, Lease: g.publishLease(seq), Gift: cmd.Type == room.CmdSendGift, Epoch: g.epoch}
	group := g.startGroup(cmd, envs, a.Lease) // publisher.go: CreateRoom's group, beside the append
	err = g.storeCall(func(ctx context.Context) error {
		ctx, end := storeSpan(ctx, cmd.TraceParent, "store.append") // tracing.go
		err := g.deps.Store.Append(ctx, a)
		end(err)
		return err
	})
	if errors.Is(err, storegate.ErrDown) {
		g.groupAbandoned(group, err)
		return nil, err // not sent: the state is the store's
	}
	if err != nil {
		g.groupAbandoned(group, err)
		return g.appendFailed(cmd, seq, err)
	}
	g.applyCommitted(cmd, seq, events)
	g.recent.add(cmd.CommandID)
	groupReady := g.publish(envs, a.Lease, group)
	g.logged(seq, envs) // observer.go: the room's feed
	ids, changes := replyEvents(envs)
	return &v1.CommandReply{RoomSeq: seq, EventIds: ids, Events: changes, Room: room.Summary(g.state),
		ImGroupReady: groupReady && cmd.Type == room.CmdCreateRoom}, nil
}

// replyEvents is a reply's event ids and events, from a command's envelopes.
func replyEvents(envs []persistence.Envelope) ([]string, []*v1.RoomEvent) {
	ids := make([]string, len(envs))
	changes := make([]*v1.RoomEvent, len(envs))
	for i, e := range envs {
		ids[i] = e.EventID
		changes[i] = &v1.RoomEvent{EventId: e.EventID, EventType: e.EventType, Payload: string(e.Payload)}
	}
	return ids, changes
}

// applyCommitted applies a stored command to the state in place: no copy
// of the member map per command. Observers are told before and after
// (one may read the member map from a goroutine of its own, under a lock
// it takes in Applying).
func (g *grain) applyCommitted(cmd room.Command, seq int64, events []room.Event) {
	obs := g.observers()
	for _, o := range obs {
		o.Applying(events)
	}
	g.state.ApplyInPlace(seq, events)
	g.readsApply(events)
	for _, o := range obs {
		o.Committed(cmd, events)
	}
}

// appendFailed turns a failed append into the caller's answer. Any
// failure may hide a write that did happen (a commit whose ack was lost),
// so the state is reloaded before the next write either way (reads go
// on answering from it: it holds every acknowledged write).
func (g *grain) appendFailed(cmd room.Command, seq int64, err error) (*v1.CommandReply, error) {
	if cmd.Type == room.CmdSendGift {
		g.loaded = false
		g.dropView()
		return g.giftAppendFailed(cmd, seq, err)
	}
	if !errors.Is(err, persistence.ErrConflict) {
		// The state in memory is still every acknowledged write (the
		// failed one was not acknowledged), so reads keep answering from
		// it while the store is away; the next write reloads first.
		g.unsure = true
		g.log.Warn("room append failed", "seq", seq, "command_id", cmd.CommandID, "error", err)
		return nil, fmt.Errorf("%w: command not stored, retry", errclass.Unavailable)
	}
	g.loaded = false
	g.dropView()
	// The command_id fence caught a retry of a command older than the
	// in-memory cache: answer it from the log.
	if reply, dupErr := g.recorded(cmd); dupErr == nil || errors.Is(dupErr, errclass.Exists) {
		return reply, dupErr
	}
	g.log.Warn("room append fenced: seq taken by another writer; reloading", "seq", seq, "command_id", cmd.CommandID)
	return nil, fmt.Errorf("%w: room was changed by another writer, retry", errclass.Unavailable)
}
