package roomgrain

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// replies answers the requests this client sends to grains of its own
// node (Client.local): one process registered once per client, and a
// request id per call in the reply address, where cluster.Request made
// a future per call (a registry entry added and removed, a timer, a
// goroutine's wait on a condition): about a tenth of a GetRoom's CPU.
// The grain answers as it answers any request, to ctx.Sender(); a
// request to a grain that stopped comes back from the dead-letter
// process, as it does to a future.
type replies struct {
	pid *actor.PID

	mu      sync.Mutex
	next    uint32
	waiting map[uint32]chan any
}

func newReplies(sys *actor.ActorSystem) *replies {
	r := &replies{waiting: make(map[uint32]chan any)}
	// The id is unique in the registry (NextId is its own sequence):
	// several clients of one node each have theirs.
	r.pid, _ = sys.ProcessRegistry.Add(r, "roomgrain-replies$"+sys.ProcessRegistry.NextId())
	return r
}

// expect returns the reply address of a new request and the channel its
// answer arrives on (at most one; buffered, so delivery never blocks).
func (r *replies) expect() (*actor.PID, uint32, chan any) {
	ch := make(chan any, 1)
	r.mu.Lock()
	r.next++
	if r.next == 0 { // 0 is a PID without a request id
		r.next++
	}
	id := r.next
	r.waiting[id] = ch
	r.mu.Unlock()
	return &actor.PID{Address: r.pid.Address, Id: r.pid.Id, RequestId: id}, id, ch
}

// forget drops a request nobody waits for any more: its answer, if it
// still comes, is dropped.
func (r *replies) forget(id uint32) {
	r.mu.Lock()
	delete(r.waiting, id)
	r.mu.Unlock()
}

// SendUserMessage is an answer to the request pid.RequestId.
func (r *replies) SendUserMessage(pid *actor.PID, message any) {
	r.mu.Lock()
	ch := r.waiting[pid.RequestId]
	delete(r.waiting, pid.RequestId)
	r.mu.Unlock()
	if ch == nil {
		return // given up on (timeout, owner change): as a future that timed out
	}
	_, msg, _ := actor.UnwrapEnvelope(message)
	if _, dead := msg.(*actor.DeadLetterResponse); dead {
		msg = attemptErr{actor.ErrDeadLetter} // as a future answers it
	}
	ch <- msg
}

func (r *replies) SendSystemMessage(*actor.PID, any) {}
func (r *replies) Stop(*actor.PID)                   {}

// attemptErr is an attempt's failure on the channel of its answer.
type attemptErr struct{ err error }

// localPid is the room's grain when it is an actor of this node (in the
// cluster's PID cache), else nil: the first request to a room, and every
// request to a grain on another member, go through cluster.Request.
func (c *Client) localPid(identity string) *actor.PID {
	pid, ok := c.Cluster.PidCache.Get(identity, Kind)
	if !ok || pid.Address != c.Cluster.ActorSystem.Address() {
		return nil
	}
	return pid
}

// replyProcess is the client's replies, registered at its first local request.
func (c *Client) replyProcess() *replies {
	c.repliesOnce.Do(func() { c.replies = newReplies(c.Cluster.ActorSystem) })
	return c.replies
}

// sendLocal sends msg to the local grain pid and returns the channel of
// its answer (attemptErr for a grain that had stopped) and the
// request's id.
func (c *Client) sendLocal(pid *actor.PID, msg any) (<-chan any, uint32) {
	r := c.replyProcess()
	sender, id, ch := r.expect()
	if toFront(msg) {
		pid = Front(c.Cluster.ActorSystem, pid) // front.go: a like, decided before the grain's mailbox
	}
	c.Cluster.ActorSystem.Root.RequestWithCustomSender(pid, msg, sender)
	return ch, id
}
