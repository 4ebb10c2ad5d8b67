package giftsettle

import (
	"sync"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// maxStuck bounds the reservations remembered as failing. Past it a new
// failure is not remembered, so it is retried every pass; the bound only
// guards memory against a flood no operator would leave unresolved.
const maxStuck = 10_000

// holdID names a reservation.
type holdID struct{ app, command string }

// attempt is what the reconciler remembers of a reservation whose
// settlement failed.
type attempt struct {
	fails  int
	next   time.Time // not tried again before
	parked bool
}

// Stuck remembers, in this process, the reservations whose settlement
// failed: each backs off (Interval doubled per failure, up to MaxBackoff)
// and after ParkAfter failures is parked: no longer tried, counted by
// wallet_gift_holds_parked, logged at ERROR, left to an operator (roomctl
// wallet hold confirm|refund). Either way it leaves the head of the
// queue: the scan reads past the ones it skips, so a hundred holds that
// cannot settle never starve the others, and a retry waits behind every
// reservation that never failed. A restart forgets it all: the
// parked holds are tried again and park again after the same bound.
type Stuck struct {
	mu sync.Mutex
	m  map[holdID]*attempt
}

// NewStuck returns an empty memory.
func NewStuck() *Stuck { return &Stuck{m: map[holdID]*attempt{}} }

// order picks up to n of holds (oldest first) to try now: first the ones
// that never failed, then those whose backoff is over, so a failing hold
// goes to the back of the queue. Parked and backing-off ones are left out
// and counted in skipped.
func (s *Stuck) order(holds []persistence.GiftHold, now time.Time, n int, skipped *int) []persistence.GiftHold {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]persistence.GiftHold, 0, min(n, len(holds)))
	var retry []persistence.GiftHold
	for _, h := range holds {
		a, ok := s.m[holdID{h.AppCode, h.CommandID}]
		switch {
		case !ok:
			if len(out) < n {
				out = append(out, h)
			}
		case a.parked || now.Before(a.next):
			*skipped++
		default:
			retry = append(retry, h)
		}
	}
	for _, h := range retry {
		if len(out) >= n {
			break
		}
		out = append(out, h)
	}
	return out
}

// failed records a failure and reports the failures so far and whether
// this one parked the reservation.
func (s *Stuck) failed(id holdID, now time.Time, base, maxBackoff time.Duration, parkAfter int) (fails int, parked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[id]
	if !ok {
		if len(s.m) >= maxStuck {
			return 1, false
		}
		a = &attempt{}
		s.m[id] = a
	}
	a.fails++
	d := base
	for i := 1; i < a.fails && d < maxBackoff; i++ {
		d *= 2
	}
	a.next = now.Add(min(d, maxBackoff))
	if a.fails >= parkAfter && !a.parked {
		a.parked = true
		return a.fails, true
	}
	return a.fails, false
}

// settled forgets id.
func (s *Stuck) settled(id holdID) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// size is how many reservations are remembered; parked how many of them
// are parked.
func (s *Stuck) size() (size, parked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.m {
		if a.parked {
			parked++
		}
	}
	return len(s.m), parked
}

// keepOnly forgets every reservation not in open: settled by an operator
// or by another node. Called only after a scan that saw every open one.
func (s *Stuck) keepOnly(open map[holdID]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.m {
		if !open[id] {
			delete(s.m, id)
		}
	}
}
