package roomgrain

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// A room's front takes its LikeRoom commands before its mailbox. A
// liked room gets thousands of likes a second, and each one queued in
// the grain's mailbox waits ahead of the joins and gifts behind it: the
// room's likes observer (actors/roomlikes) opens a front, a process of
// its own in the node's registry beside the grain, and this node's room
// client sends the room's likes there instead. The front decides a like
// on the caller's goroutine, against what the room published at its last
// commit, and hands the grain (with the like's sender) any like it cannot
// decide there; only the window's tally reaches the grain's mailbox. A
// like from another node reaches the grain, as every command does, and
// the grain hands it to the same observer.

// frontSuffix names a grain's front after the grain: an app code or a
// room id cannot hold ':' (room.CheckID), so no grain is named so.
const frontSuffix = ":front"

// OpenFront registers p as the front of the grain (an activation's
// Self): this node's room client sends the room's LikeRoom commands to
// p from now on (their sender in the envelope, as a grain gets them),
// until the returned close is called. Call it on the room's goroutine;
// close may be called anywhere, more than once.
func OpenFront(sys *actor.ActorSystem, grain *actor.PID, p actor.Process) (closeFront func()) {
	pid, ok := sys.ProcessRegistry.Add(p, grain.Id+frontSuffix)
	if !ok {
		return func() {} // one open already (an activation's, not yet closed): the grain takes them
	}
	return func() { sys.ProcessRegistry.Remove(pid) }
}

// Front is where a LikeRoom for the local grain goes: the room's front
// when it has one open, else the grain.
func Front(sys *actor.ActorSystem, grain *actor.PID) *actor.PID {
	id := grain.Id + frontSuffix
	if _, ok := sys.ProcessRegistry.GetLocal(id); ok {
		return &actor.PID{Address: grain.Address, Id: id}
	}
	return grain
}

// toFront reports whether msg is a command a room's front takes.
func toFront(msg any) bool {
	rc, ok := msg.(*v1.RoomCommand)
	if !ok {
		return false
	}
	_, like := rc.GetCommand().(*v1.RoomCommand_LikeRoom)
	return like
}

// What a front reads of its room. Epoch, Writable and RecentIDs read the
// grain's fields: call them on the room's goroutine (an Observer call),
// and publish what the front needs; Holds may be called anywhere.

// Epoch is the lease epoch the room's state was loaded under.
func (r Room) Epoch() int64 { return r.g.epoch }

// Writable reports whether the room would write now without loading its
// state first (loaded, and no append's outcome unknown).
func (r Room) Writable() bool { return r.g.loaded && !r.g.unsure }

// Holds reports whether the node holds the room's lease under epoch now
// (always, without a Lease). It reads the node's lease table, not the
// grain: any goroutine may call it.
func (r Room) Holds(epoch int64) bool {
	if r.g.deps.Lease == nil {
		return true
	}
	e, ok := r.g.deps.Lease.Hold(r.g.identity)
	return ok && e == epoch
}

// RecentIDs is the command ids the room holds as recent (RecentID), at
// most RecentCommands, oldest first; a new slice.
func (r Room) RecentIDs() []string { return slices.Clone(r.g.recent.order) }

// RecentCommands is how many command ids a room holds as recent: a
// command committed since the RecentCommands-th last one is recent.
const RecentCommands = recentIDs

// ReceiptsEncoder is an Observer that keeps the room's like receipts
// encoded off the room's goroutine (actors/roomlikes): a snapshot of a
// liked room holds thousands of receipts, and encoding them took
// milliseconds of the room's goroutine every SnapshotEvery commands.
type ReceiptsEncoder interface {
	// EncodedLikeReceipts is rs's JSON (room.EncodeLikeReceipts) when
	// it has it ready, else nil; rs is the room's receipts now.
	EncodedLikeReceipts(rs map[string]room.LikeReceipts) []byte
}

// marshalState is the room's snapshot: its receipts as an observer
// encoded them when one has them ready (ReceiptsEncoder).
func (g *grain) marshalState() ([]byte, error) {
	if rs := g.state.LikeReceipts(); rs != nil {
		for _, o := range g.observers() {
			if e, ok := o.(ReceiptsEncoder); ok {
				if enc := e.EncodedLikeReceipts(rs); enc != nil {
					return g.state.MarshalWithLikeReceipts(enc)
				}
			}
		}
	}
	return g.state.Marshal()
}
