package roomgrain

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// A room's view is its last answer to a first page of GetRoom, published
// beside the grain for this node's room client to answer the next reads
// of that page without the grain's mailbox: a GetRoom read that answer
// again and again, and the mailbox round trip (the queue, a dispatcher
// worker's wake-up, the reply's way back) was most of what the room side
// cost it.
//
// A published answer is exactly as fresh as the mailbox's: the grain
// withdraws it on its own goroutine before anything changes the state it
// was built from (a commit, before the command is answered; a reload; a
// lease epoch the grain no longer serves under; a stop), so a caller
// whose command was acknowledged can no longer find an answer from before
// it. A reader also finds the node's lease on the room at the epoch the
// answer was built under, or goes to the grain, which answers (or
// refuses) as it always has.

// viewSuffix names a grain's view process after the grain, as its front
// (front.go) is named: no grain is named with a ':'.
const viewSuffix = ":view"

// viewProcess is the published view, a process of the node's registry
// so that the client finds it by the grain's PID alone. Nothing sends it
// messages.
type viewProcess struct {
	cur atomic.Pointer[roomView]
	// readMs is when a client last answered from the view (ms, the
	// grain's clock, coarsened to readEvery): a room only read stays
	// active as if the reads had reached its mailbox.
	readMs    atomic.Int64
	readEvery int64 // ms: a second, or a quarter of a shorter idle timeout

	identity string
	lease    Lease // nil: the room is always held (no lease table)
	clock    func() int64
	sys      *actor.ActorSystem
	pid      *actor.PID // its own, in sys's registry
}

// roomView is one published answer and what it was built under.
type roomView struct {
	resp  *v1.RoomResponse
	size  int   // the page size it answers
	epoch int64 // the lease epoch the state was loaded under
}

func (*viewProcess) SendUserMessage(*actor.PID, any)   {}
func (*viewProcess) SendSystemMessage(*actor.PID, any) {}
func (*viewProcess) Stop(*actor.PID)                   {}

// answer is the view's answer to a first page of size, or nil.
func (p *viewProcess) answer(size int) *v1.RoomResponse {
	v := p.cur.Load()
	if v == nil || v.size != size {
		return nil
	}
	if p.lease != nil {
		if epoch, ok := p.lease.Hold(p.identity); !ok || epoch != v.epoch {
			return nil
		}
	}
	if now := p.clock(); now-p.readMs.Load() >= p.readEvery {
		p.readMs.Store(now)
	}
	return v.resp
}

// publishView publishes reply as the answer to first pages of size,
// registering the room's view process at its first publication.
func (g *grain) publishView(ctx actor.Context, reply *v1.CommandReply, size int) {
	if g.view == nil {
		if ctx == nil || ctx.Self() == nil {
			return
		}
		clock := g.deps.Clock
		p := &viewProcess{identity: g.identity, lease: g.deps.Lease, clock: func() int64 { return clock().UnixMilli() }, sys: ctx.ActorSystem(),
			readEvery: min(1000, g.deps.Config.IdleTimeout.Milliseconds()/4)}
		pid, ok := p.sys.ProcessRegistry.Add(p, ctx.Self().Id+viewSuffix)
		if !ok {
			return // an older activation's is still registered: the mailbox answers
		}
		p.pid, g.view = pid, p
	}
	g.view.cur.Store(&roomView{resp: &v1.RoomResponse{Reply: reply}, size: size, epoch: g.epoch})
}

// dropView withdraws the published answer: call it on the room's
// goroutine before the state it was built from changes or stops being
// served.
func (g *grain) dropView() {
	if g.view != nil {
		g.view.cur.Store(nil)
	}
}

// closeView withdraws the view and its process (the grain stops).
func (g *grain) closeView() {
	if g.view == nil {
		return
	}
	g.view.cur.Store(nil)
	g.view.sys.ProcessRegistry.Remove(g.view.pid)
	g.view = nil
}

// viewReadWithin reports whether a client answered from the view within
// ms of now.
func (g *grain) viewReadWithin(nowMs, ms int64) bool {
	return g.view != nil && nowMs-g.view.readMs.Load() < ms
}

// readView answers msg from the local grain pid's view when msg is a
// first page of GetRoom the view holds.
func (c *Client) readView(pid *actor.PID, msg any) (*v1.RoomResponse, bool) {
	rc, ok := msg.(*v1.RoomCommand)
	if !ok {
		return nil, false
	}
	get, ok := rc.GetCommand().(*v1.RoomCommand_GetRoom)
	if !ok || get.GetRoom.GetPageToken() != "" {
		return nil, false
	}
	p, err := room.ParseMembersPage(get.GetRoom)
	if err != nil {
		return nil, false // the grain refuses it
	}
	proc, ok := c.Cluster.ActorSystem.ProcessRegistry.GetLocal(pid.Id + viewSuffix)
	if !ok {
		return nil, false
	}
	v, ok := proc.(*viewProcess)
	if !ok {
		return nil, false
	}
	if resp := v.answer(p.Size); resp != nil {
		return resp, true
	}
	return nil, false
}
