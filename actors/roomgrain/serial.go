package roomgrain

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
)

// Serial runs one room's background work (its publisher's, an
// observer's such as the directory worker) in the order it was posted,
// one item at a time, on a goroutine of roomDispatcher only while it has
// work.
//
// The publisher and the directory worker were child actors of the
// grain: a PID, a mailbox and its ring buffer, an actor context, a
// process-registry entry and a place in the grain's child set each,
// ~3.7 KB of a one-member room's 12.9 KB live heap, kept for as long as
// the room is active although an idle room has nothing for them to do.
// An idle Serial is this struct.
//
// What the actors gave, it keeps: order (one runner at a time, FIFO),
// work off the grain's mailbox, and a stop after which nothing queued
// runs (a child's queued messages went to dead letters). A panicking item
// is recovered and reported, and the items after it still run, as after
// a child's restart.
type Serial struct {
	mu      sync.Mutex
	queue   []func()
	running bool
	stopped bool
	// Panicked is called (on the runner's goroutine) after an item
	// panicked, with the panic and its stack. Set it before the first Post.
	Panicked func(p any, stack []byte)
}

// Post queues fn; false once stopped (fn will not run).
func (s *Serial) Post(fn func()) bool {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return false
	}
	s.queue = append(s.queue, fn)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		roomDispatcher.Schedule(s.drain)
	}
	return true
}

// Stop drops what is queued; an item already running finishes.
func (s *Serial) Stop() {
	s.mu.Lock()
	s.stopped = true
	clear(s.queue)
	s.queue = nil
	s.mu.Unlock()
}

func (s *Serial) drain() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.stopped {
			// An idle room keeps no backing array.
			s.queue, s.running = nil, false
			s.mu.Unlock()
			return
		}
		fn := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.run(fn)
	}
}

func (s *Serial) run(fn func()) {
	defer func() {
		if p := recover(); p != nil {
			if s.Panicked != nil {
				s.Panicked(p, debug.Stack())
				return
			}
			slog.Error("room background work panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
	}()
	fn()
}
