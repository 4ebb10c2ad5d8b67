package directory

import "testing"

func TestJoinClockOrdersOneUsersJoins(t *testing.T) {
	c := NewJoinClock()
	steps := []struct {
		app, user string
		now, want int64
	}{
		{"a", "u", 1000, 1000},
		{"a", "u", 1000, 1001}, // same millisecond: after the first
		{"a", "u", 999, 1002},  // a clock that stepped back: still after
		{"a", "v", 1000, 1000}, // another user is not moved
		{"b", "u", 1000, 1000}, // nor the same id in another app
		{"a", "u", 1500, 1500}, // a later join keeps its time
	}
	for i, s := range steps {
		if got := c.Next(s.app, s.user, s.now); got != s.want {
			t.Fatalf("step %d: %s/%s at %d got %d, want %d", i, s.app, s.user, s.now, got, s.want)
		}
	}
	// Entries far behind now are swept, so the map holds recent joiners only.
	c.Next("a", "w", 1500+2*joinClockWindow)
	if len(c.last) != 1 {
		t.Fatalf("after a sweep %d entries remain, want only the newest join", len(c.last))
	}
}
