package roomgrain

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// Lease tells a room grain whether its node may serve the room now
// (ownership.Table implements it). A grain answers nothing — no reply, no
// rule rejection, no read — without it: Proto.Actor can have a room live
// on two nodes, and only the lease holder's answers are true.
type Lease interface {
	// Hold reports the epoch of the node's lease on the room's shard and
	// whether the node holds it now.
	Hold(identity string) (epoch int64, ok bool)
}

// lapsingLease is a Lease that can lapse without being lost: its node
// stops serving when it cannot renew (ownership.Etcd).
type lapsingLease interface {
	Serving() bool
	// Granted is Hold without the renewal: the table still names this
	// node as the owner under its current lease.
	Granted(identity string) (epoch int64, ok bool)
}

// errMoved answers a command that reached a grain whose node does not
// hold the room's lease (any more): retryable, and the room client
// retries it on the current owner.
// It is not a rule error (no Decide row breaks it); its code brings it
// back as itself through replyOf.
var errMoved = errclass.New(errclass.CodeRoomMoved)

// gate checks the lease before a command is handled. Without the lease
// the grain answers errMoved and stops (the next command activates the
// room where the lease is). With the lease under a newer epoch than the
// state was loaded under, the node lost and retook the shard meanwhile:
// another owner may have written, so the state is reloaded.
func (g *grain) gate(ctx actor.Context) error {
	if g.deps.Lease == nil {
		return nil
	}
	epoch, ok := g.deps.Lease.Hold(g.identity)
	if !ok {
		if l, ok := g.deps.Lease.(lapsingLease); ok && !l.Serving() {
			// The node lost its coordinator (etcd), maybe not the room.
			// While its grant stands nobody else can take the shard, so
			// the grain keeps its state and stays, refusing at once: the
			// requests routed here are refused in milliseconds instead of
			// waiting for an activation the node cannot grant, and if the
			// lease survives the outage the room answers again at the
			// next renewal without a reload.
			if granted, held := l.Granted(g.identity); !held || granted != g.epoch {
				ctx.Poison(ctx.Self())
			}
			return ErrNoCoordinator
		}
		ctx.Poison(ctx.Self())
		return errMoved
	}
	if g.loaded && epoch != g.epoch {
		g.loaded = false
		g.dropView()
	}
	return nil
}

// claim raises the room's epoch fence to this node's lease epoch before
// the state is read, so that no append of an older owner can land after
// the read (it would make the state stale without this grain knowing).
// It returns the epoch the state about to be read is loaded under; the
// grain's own epoch changes only with the state (loadIn), so a claim the
// store did not answer leaves the state in memory serving reads instead
// of marking it stale (gate compares the lease's epoch with the grain's).
func (g *grain) claim(ctx context.Context) (int64, error) {
	if g.deps.Lease == nil {
		return 0, nil
	}
	epoch, ok := g.deps.Lease.Hold(g.identity)
	if !ok {
		return 0, errMoved
	}
	if err := g.deps.Store.FenceRoom(ctx, g.key(), epoch); err != nil {
		if errors.Is(err, persistence.ErrConflict) {
			return 0, errMoved
		}
		return 0, err
	}
	return epoch, nil
}
