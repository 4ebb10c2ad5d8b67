package supervise

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
)

// Tick is the message a Ticker sends to its actor.
type Tick struct{ id uint64 }

var tickerIDs atomic.Uint64

// Ticker is the timer of a polling actor: Started → Schedule; on a Tick it
// Owns → one batch → Schedule; Restarting and Stopping → Cancel. Each
// actor instance gets its own Ticker (a field of the actor struct), so a
// tick that an old incarnation's timer had already put into the mailbox
// before a restart is not Owned by the new one and is dropped; cancelling
// alone cannot catch that tick, and answering it would start a second
// chain of ticks per restart. Not safe for use outside the actor's Receive.
type Ticker struct {
	id     uint64
	cancel scheduler.CancelFunc
}

// Schedule cancels any pending tick and sends one Tick to the actor after d.
func (t *Ticker) Schedule(c actor.Context, d time.Duration) {
	t.Cancel()
	if t.id == 0 {
		t.id = tickerIDs.Add(1)
	}
	// The root context sends: the actor's own context must not be touched
	// from the timer goroutine.
	t.cancel = scheduler.NewTimerScheduler(c.ActorSystem().Root).SendOnce(d, c.Self(), &Tick{id: t.id})
}

// Owns reports whether m was sent by this Ticker (and not by an earlier
// incarnation's).
func (t *Ticker) Owns(m *Tick) bool { return m != nil && t.id != 0 && m.id == t.id }

// Cancel stops the pending tick, if any.
func (t *Ticker) Cancel() {
	if t.cancel != nil {
		t.cancel()
		t.cancel = nil
	}
}
