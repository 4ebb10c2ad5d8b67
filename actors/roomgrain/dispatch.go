package roomgrain

import (
	"sync/atomic"
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
//
// At most maxIdle goroutines wait for turns; one more that finishes a turn
// ends. Waiting ones each took a share of the turns that came, so under
// steady light load none ever sat idle for long enough to end: a burst
// (a wave of refreshes, rooms blocked on a slow store) left hundreds of
// goroutines parked for good.
type workerPool struct {
	work    chan func() // unbuffered: a send only succeeds into an idle worker
	idle    time.Duration
	maxIdle int32
	waiting atomic.Int32 // goroutines waiting for a turn
}

var _ actor.Dispatcher = (*workerPool)(nil)

// maxIdleWorkers is the room dispatcher's cap: as many waiting
// goroutines as the concurrency of the heaviest load measured (ghz and
// roomctl bench at 64 callers).
const maxIdleWorkers = 64

func newWorkerPool(idle time.Duration, maxIdle int32) *workerPool {
	return &workerPool{work: make(chan func()), idle: idle, maxIdle: maxIdle}
}

// roomDispatcher is shared by every room actor of the process.
var roomDispatcher = newWorkerPool(workerIdle, maxIdleWorkers)

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
		if p.waiting.Add(1) > p.maxIdle {
			p.waiting.Add(-1)
			return
		}
		select {
		case fn := <-p.work:
			p.waiting.Add(-1)
			fn()
			t.Reset(p.idle)
		case <-t.C:
			p.waiting.Add(-1)
			return
		}
	}
}
