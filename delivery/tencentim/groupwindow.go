package tencentim

import (
	"context"
	"sync"
	"time"
)

// groupWindow keeps a group's sends within Tencent's count of the
// messages it received in a second, whatever their transit does to their
// spacing. A send reaches Tencent at some moment between its start and
// its answer, so a send starts only while fewer than limit sends are in
// flight or were answered within the last second (plus windowSlack).
// Then no one-second window of arrivals holds more than limit: of the
// sends arriving in it, the one started last was admitted while each
// other one was in flight or answered less than a second before.
//
// The rate limiter in front still spaces the sends; this bound only
// binds when their transit bunches them (a loaded machine, a slow hop),
// where spacing alone let a 41st message into Tencent's second.
type groupWindow struct {
	limit int

	mu       sync.Mutex
	inflight int
	done     []time.Time   // answers within the window, oldest first
	freed    chan struct{} // closed (and dropped) when a send ends
}

// windowSlack widens the window past one second for the clocks' and the
// count's edges.
const windowSlack = 20 * time.Millisecond

// acquire blocks until a send may start or ctx ends.
func (w *groupWindow) acquire(ctx context.Context) error {
	for {
		w.mu.Lock()
		now := time.Now()
		w.prune(now)
		if w.inflight+len(w.done) < w.limit {
			w.inflight++
			w.mu.Unlock()
			return nil
		}
		// Full: a slot frees when the oldest answer leaves the window;
		// with every slot in flight, an answer must come first.
		var expiry <-chan time.Time
		var t *time.Timer
		if len(w.done) > 0 {
			t = time.NewTimer(w.done[0].Add(time.Second + windowSlack).Sub(now))
			expiry = t.C
		}
		if w.freed == nil {
			w.freed = make(chan struct{})
		}
		freed := w.freed
		w.mu.Unlock()
		var err error
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-expiry:
		case <-freed:
		}
		if t != nil {
			t.Stop()
		}
		if err != nil {
			return err
		}
	}
}

// release ends a send that acquire admitted.
func (w *groupWindow) release() {
	w.mu.Lock()
	w.inflight--
	w.done = append(w.done, time.Now())
	if w.freed != nil {
		close(w.freed)
		w.freed = nil
	}
	w.mu.Unlock()
}

// prune drops answers older than the window. Callers hold mu.
func (w *groupWindow) prune(now time.Time) {
	cut := now.Add(-time.Second - windowSlack)
	i := 0
	for i < len(w.done) && !w.done[i].After(cut) {
		i++
	}
	if i > 0 {
		w.done = append(w.done[:0], w.done[i:]...)
	}
}

// idle: nothing in flight or in the window (a new window is the same).
func (w *groupWindow) idle(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.prune(now)
	return w.inflight == 0 && len(w.done) == 0
}
