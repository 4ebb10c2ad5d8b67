package room

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// mailboxThroughput is protoactor's default: messages a mailbox runs per
// turn before it yields its goroutine.
const mailboxThroughput = 300

// workerIdle is how long a pool goroutine waits for another turn before
// it ends.
const workerIdle = 10 * time.Second

// workerPool is the dispatcher of the room actors (grain, publisher,
// directory worker): it runs a mailbox turn on a goroutine that ran one
// before, if one is idle, else on a new one. Protoactor's default starts
// a goroutine per turn, and a command takes three turns (grain, publisher,
// directory worker), each growing a fresh 8 KB stack through the store
// and the cluster: stack copying was ~6-8% of a dev node's CPU under
// joins. A kept goroutine keeps its grown stack.
//
// Schedule never waits and never queues: a turn starts at once, as with
// the default, so a mailbox that blocks (a store call) holds up no other.
type workerPool struct {
	work chan func() // unbuffered: a send only succeeds into an idle worker
	idle time.Duration
}

var _ actor.Dispatcher = (*workerPool)(nil)

func newWorkerPool(idle time.Duration) *workerPool {
	return &workerPool{work: make(chan func()), idle: idle}
}

// roomDispatcher is shared by every room actor of the process.
var roomDispatcher = newWorkerPool(workerIdle)

func (p *workerPool) Schedule(fn func()) {
	select {
	case p.work <- fn:
	default:
		go p.run(fn)
	}
}

func (p *workerPool) Throughput() int { return mailboxThroughput }

func (p *workerPool) run(fn func()) {
	fn()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		select {
		case fn := <-p.work:
			fn()
			t.Reset(p.idle)
		case <-t.C:
			return
		}
	}
}
