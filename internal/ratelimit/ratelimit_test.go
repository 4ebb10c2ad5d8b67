package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/ratelimit"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func giftLimits(nodes int) configs.RateLimitConfig {
	c := configs.DefaultRateLimits()
	c.Enabled, c.Nodes = true, nodes
	c.Gift = configs.RateClassConfig{UserPerSecond: 5, UserBurst: 10, AppPerSecond: 100, AppBurst: 100}
	return c
}

// A client sending gifts at ten times its limit for 20 s gets about its
// limit through (rate × time + burst) and is refused the rest with a
// retry-after that, waited out, lets the next call pass; five other users
// of the same app at their own pace are never refused.
func TestTenTimesTheLimit(t *testing.T) {
	c := newClock()
	l := ratelimit.New(giftLimits(1)).WithClock(c.now)
	const seconds, heavyRate = 20, 50 // 10 × 5/s
	var heavyOK, heavyRefused int
	others := map[string]int{}
	for step := range seconds * heavyRate {
		c.advance(time.Second / heavyRate)
		if r, ok := l.Allow("app", "heavy", ratelimit.ClassGift); ok {
			heavyOK++
		} else {
			heavyRefused++
			if r.Scope != ratelimit.ScopeUser || r.Class != ratelimit.ClassGift || r.RetryAfter <= 0 || r.RetryAfter > time.Second/5 {
				t.Fatalf("refusal %+v: want the user's gift bucket with a retry-after up to one token's time", r)
			}
		}
		if step%10 == 0 { // 5/s each
			for i := range 5 {
				u := fmt.Sprintf("u%d", i)
				if r, ok := l.Allow("app", u, ratelimit.ClassGift); !ok {
					t.Fatalf("%s at its own limit refused: %+v", u, r)
				}
				others[u]++
			}
		}
	}
	if max := 5*seconds + 10; heavyOK > max || heavyOK < 5*seconds {
		t.Fatalf("heavy client got %d through in %d s, want between %d and %d", heavyOK, seconds, 5*seconds, max)
	}
	if heavyRefused < seconds*heavyRate*8/10 {
		t.Fatalf("heavy client refused %d of %d", heavyRefused, seconds*heavyRate)
	}
	// Waiting out the retry-after lets the next call through.
	r, ok := l.Allow("app", "heavy", ratelimit.ClassGift)
	if ok {
		t.Fatal("still under the limit after the burst")
	}
	c.advance(r.RetryAfter)
	if _, ok := l.Allow("app", "heavy", ratelimit.ClassGift); !ok {
		t.Fatalf("refused again after waiting the retry-after %v", r.RetryAfter)
	}
	// Another class and another app are buckets of their own.
	if _, ok := l.Allow("app", "heavy", ratelimit.ClassJoin); !ok {
		t.Fatal("a gift limit refused a join")
	}
	if _, ok := l.Allow("other-app", "heavy", ratelimit.ClassGift); !ok {
		t.Fatal("one app's limit refused the same user id in another app")
	}
	t.Logf("heavy: %d through, %d refused; others %v", heavyOK, heavyRefused, others)
}

// The app's limit caps the app whatever its users; a call the app refuses
// takes nothing from its user's bucket.
func TestAppLimit(t *testing.T) {
	c := newClock()
	l := ratelimit.New(giftLimits(1)).WithClock(c.now)
	ok := 0
	for i := range 300 { // 300 users, one gift each, at one instant
		if _, pass := l.Allow("app", fmt.Sprintf("u%d", i), ratelimit.ClassGift); pass {
			ok++
		} else if r, _ := l.Allow("app", fmt.Sprintf("u%d", i), ratelimit.ClassGift); r.Scope != ratelimit.ScopeApp {
			t.Fatalf("refusal %+v, want the app's", r)
		}
	}
	if ok != 100 {
		t.Fatalf("%d gifts through at once, want the app burst 100", ok)
	}
	c.advance(time.Second)
	// u299 was refused twice by the app: its own bucket is still full.
	for i := range 10 {
		if r, pass := l.Allow("app", "u299", ratelimit.ClassGift); !pass {
			t.Fatalf("call %d of a user the app refused: %+v (its bucket was charged)", i, r)
		}
	}
}

// Spread over 3 nodes (each enforcing a third), a client at ten times its
// limit gets between a third of the limit (all on one node) and the limit
// (evenly spread) through, plus the bursts.
func TestSpreadOverNodes(t *testing.T) {
	c := newClock()
	var nodes [3]*ratelimit.Limiter
	for i := range nodes {
		nodes[i] = ratelimit.New(giftLimits(3)).WithClock(c.now)
	}
	const seconds, heavyRate = 30, 50
	spread, pinned := 0, 0
	for step := range seconds * heavyRate {
		c.advance(time.Second / heavyRate)
		if _, ok := nodes[step%3].Allow("app", "spread", ratelimit.ClassGift); ok {
			spread++
		}
		if _, ok := nodes[0].Allow("app", "pinned", ratelimit.ClassGift); ok {
			pinned++
		}
	}
	limit := 5 * seconds
	if spread > limit+10 || spread < limit*9/10 {
		t.Fatalf("spread client: %d through, want about %d (at most %d)", spread, limit, limit+10)
	}
	if pinned > limit/3+4 || pinned < limit/3 {
		t.Fatalf("pinned client: %d through, want about %d", pinned, limit/3)
	}
	t.Logf("30 s at 10x: spread over 3 nodes %d through, pinned to one %d (limit %d)", spread, pinned, limit)
}

func TestOffAllowsAll(t *testing.T) {
	var l *ratelimit.Limiter = ratelimit.New(configs.DefaultRateLimits())
	for range 1000 {
		if _, ok := l.Allow("app", "u", ratelimit.ClassCreate); !ok {
			t.Fatal("a limiter that is off refused")
		}
	}
}

// An unknown class is charged as a command, never let through free.
func TestUnknownClassIsACommand(t *testing.T) {
	cfg := configs.DefaultRateLimits()
	cfg.Enabled = true
	l := ratelimit.New(cfg)
	for {
		if _, ok := l.Allow("app", "u", ratelimit.ClassCommand); !ok {
			break
		}
	}
	if r, ok := l.Allow("app", "u", "no-such-class"); ok || r.Class != ratelimit.ClassCommand {
		t.Fatalf("an unknown class after the command bucket ran dry: %+v, %v", r, ok)
	}
	if !ratelimit.IsRead(ratelimit.ReadGetRoom) || ratelimit.IsRead("JoinRoom") {
		t.Fatal("IsRead")
	}
}

// A refunded token is back in both buckets (a command_id already
// answered costs nothing): a caller retrying one answered command a
// thousand times keeps its whole burst; a refund never lifts a bucket
// past its burst, and a second refund of one token does nothing.
func TestRefundGivesTheTokenBack(t *testing.T) {
	cfg := configs.DefaultRateLimits()
	cfg.Enabled = true
	cfg.Command = configs.RateClassConfig{UserPerSecond: 1, UserBurst: 5, AppPerSecond: 2, AppBurst: 8}
	now := time.Unix(1_700_000_000, 0)
	l := ratelimit.New(cfg).WithClock(func() time.Time { return now })
	for range 1000 {
		tok, _, ok := l.Take("app", "u1", ratelimit.ClassCommand)
		if !ok {
			t.Fatal("a retry of an answered command was refused: the refunds did not come back")
		}
		tok.Refund()
		tok.Refund() // the second does nothing
	}
	for i := range 5 {
		if _, ok := l.Allow("app", "u1", ratelimit.ClassCommand); !ok {
			t.Fatalf("call %d of the burst of 5 refused", i)
		}
	}
	if r, ok := l.Allow("app", "u1", ratelimit.ClassCommand); ok || r.Scope != ratelimit.ScopeUser {
		t.Fatalf("the 6th call: %+v %v, want refused by the user's bucket", r, ok)
	}
	// The app's bucket holds 8 - 5 = 3: a refund on a full bucket added
	// nothing beyond its burst.
	for i := range 3 {
		if _, ok := l.Allow("app", fmt.Sprint("v", i), ratelimit.ClassCommand); !ok {
			t.Fatalf("app call %d refused", i)
		}
	}
	if r, ok := l.Allow("app", "w", ratelimit.ClassCommand); ok || r.Scope != ratelimit.ScopeApp {
		t.Fatalf("past the app's burst: %+v %v", r, ok)
	}
}

// One caller at ten times the app's read rate is refused by its own share
// and leaves the app's read bucket to everyone else; commands are apart.
func TestOneReaderCannotDrainTheApp(t *testing.T) {
	cfg := configs.DefaultRateLimits()
	cfg.Enabled = true
	cfg.Read = configs.RateClassConfig{UserPerSecond: 10, UserBurst: 10, AppPerSecond: 100, AppBurst: 100}
	cfg.Command = configs.RateClassConfig{UserPerSecond: 1, UserBurst: 1, AppPerSecond: 10, AppBurst: 10}
	now := time.Unix(1_700_000_000, 0)
	l := ratelimit.New(cfg).WithClock(func() time.Time { return now })
	poller := 0
	for range 1000 { // 10 s at 1000/s, ten times the app's rate
		now = now.Add(time.Millisecond)
		if _, ok := l.Allow("app", "token:poller", ratelimit.ClassRead); ok {
			poller++
		}
	}
	if poller > 10+10*10+1 {
		t.Fatalf("the poller got %d reads through, more than its share", poller)
	}
	for i := range 89 {
		if _, ok := l.Allow("app", fmt.Sprint("u", i), ratelimit.ClassRead); !ok {
			t.Fatalf("honest read %d refused after the poller", i)
		}
	}
	for i := range 10 {
		if _, ok := l.Allow("app", fmt.Sprint("u", i), ratelimit.ClassCommand); !ok {
			t.Fatalf("honest command %d refused after the poller", i)
		}
	}
}
