package directory

import "sync"

// JoinClock gives one user's joins on this node strictly increasing times.
// The directory settles a user found in two rooms by join time, newer
// wins; two joins of one user in the same millisecond tie, and each room's
// directory worker then keeps the user and sends the other room the leave,
// so a user could lose the room of their last acknowledged join (the
// eviction race, TestDirectoryUsersSwitchingRoomsKeepEveryAcknowledgedJoin).
// A join that would tie with, or precede, the user's previous join on this
// node is moved 1 ms past it. Joins of one user on two nodes are ordered by
// the nodes' clocks, whose skew is far above a millisecond anyway.
type JoinClock struct {
	mu      sync.Mutex
	last    map[string]int64 // app_code NUL user_id → time of the last join
	sweepAt int64
}

// joinClockWindow: a join more than this far behind now cannot tie with a
// new one, so its entry goes at the next sweep.
const joinClockWindow = 2_000

// NewJoinClock is one node's: its wiring makes it once and hands it to
// the node's room grains (roomgrain.Deps.Joins).
func NewJoinClock() *JoinClock { return &JoinClock{last: map[string]int64{}} }

// Next is the time of the user's join at nowMs: nowMs, or 1 ms past
// their previous join on this node.
func (c *JoinClock) Next(app, user string, nowMs int64) int64 {
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
