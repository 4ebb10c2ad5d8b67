package roomgrain

import "sync"

// joinClock gives one user's joins on this node strictly increasing times.
// The directory settles a user found in two rooms by join time, newer
// wins; two joins of one user in the same millisecond tie, and each room's
// directory worker then keeps the user and sends the other room the leave,
// so a user could lose the room of their last acknowledged join (the
// eviction race, TestDirectoryUsersSwitchingRoomsKeepEveryAcknowledgedJoin).
// A join that would tie with, or precede, the user's previous join on this
// node is moved 1 ms past it. Joins of one user on two nodes are ordered by
// the nodes' clocks, whose skew is far above a millisecond anyway.
type joinClock struct {
	mu      sync.Mutex
	last    map[string]int64 // app_code NUL user_id → time of the last join
	sweepAt int64
}

// joinClockWindow: a join more than this far behind now cannot tie with a
// new one, so its entry goes at the next sweep.
const joinClockWindow = 2_000

// newJoinClock is one node's: Deps.setDefaults makes it, so the grains of
// a node (one GrainProps) share it.
func newJoinClock() *joinClock { return &joinClock{last: map[string]int64{}} }

func (c *joinClock) next(app, user string, nowMs int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := app + "\x00" + user
	if last, ok := c.last[k]; ok && nowMs <= last {
		nowMs = last + 1
	}
	c.last[k] = nowMs
	if nowMs >= c.sweepAt {
		for k, at := range c.last {
			if at < nowMs-joinClockWindow {
				delete(c.last, k)
			}
		}
		c.sweepAt = nowMs + joinClockWindow
	}
	return nowMs
}
