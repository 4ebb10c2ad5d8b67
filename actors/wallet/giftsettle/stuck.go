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
	reason string // the last failure
}

// Stuck remembers, in this process, the reservations whose settlement
// failed: each backs off (PollInterval doubled per failure, up to MaxBackoff)
// and after ParkAfter failures is parked: RunOnce marks it parked in the
// wallet store (Wallet.ParkGift), so no reconciler on any node tries it
// again, before or after a restart; roomcell_wallet_gift_holds_parked counts it,
// an ERROR line names it, and an operator resolves it from any node
// (roomctl wallet hold confirm|refund). Once the store has it, Stuck
// forgets it. Until then (the park call failed) Stuck keeps it parked
// here and RunOnce retries the park call each pass. Either way it leaves
// the head of the queue: the scan reads past the ones it skips, so a
// hundred holds that cannot settle never starve the others, and a retry
// waits behind every reservation that never failed. A restart forgets
// only the backoff of holds not yet parked: they start counting again.
type Stuck struct {
	mu sync.Mutex
	m  map[holdID]*attempt
}

// NewStuck returns an empty memory.
func NewStuck() *Stuck { return &Stuck{m: map[holdID]*attempt{}} }

// order picks up to n of holds (oldest first) to try now: first the ones
// that never failed, then those whose backoff is over, so a failing hold
// goes to the back of the queue. Backing-off ones are left out and counted
// in skipped; parked ones whose park the store has not recorded yet are
// left out, counted and returned in repark.
func (s *Stuck) order(holds []persistence.GiftHold, now time.Time, n int, skipped *int) (try, repark []persistence.GiftHold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	try = make([]persistence.GiftHold, 0, min(n, len(holds)))
	var retry []persistence.GiftHold
	for _, h := range holds {
		a, ok := s.m[holdID{h.AppCode, h.CommandID}]
		switch {
		case !ok:
			if len(try) < n {
				try = append(try, h)
			}
		case a.parked:
			*skipped++
			repark = append(repark, h)
		case now.Before(a.next):
			*skipped++
		default:
			retry = append(retry, h)
		}
	}
	for _, h := range retry {
		if len(try) >= n {
			break
		}
		try = append(try, h)
	}
	return try, repark
}

// failed records a failure and reports the failures so far and whether
// this one parked the reservation.
func (s *Stuck) failed(id holdID, now time.Time, base, maxBackoff time.Duration, parkAfter int, reason string) (fails int, parked bool) {
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
	a.reason = reason
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

// lastFailure is the last failure recorded for id.
func (s *Stuck) lastFailure(id holdID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.m[id]; ok {
		return a.reason
	}
	return ""
}

// settled forgets id: settled, or parked in the store.
func (s *Stuck) settled(id holdID) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// size is how many reservations are remembered; parked how many of them
// are parked here and not yet in the store.
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
