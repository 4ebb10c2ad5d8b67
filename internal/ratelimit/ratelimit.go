package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hyapp/roomcell/configs"
)

// Classes: the buckets of rate_limits. A command's class is its row's in
// room's command table (room.RateClassOf); a class this package does not
// know is ClassCommand.
const (
	ClassCreate     = "create"
	ClassJoin       = "join"
	ClassGift       = "gift"
	ClassModeration = "moderation"
	ClassCommand    = "command"
	// ClassRead: the reads that cost a room or the directory a look
	// (GetRoom, ListBans, ListSeatRequests, ListRooms, ListContributors). Apart from the
	// commands, so a client polling a room spends no command's token.
	ClassRead = "read"
)

// The read types (RPC names; they are no room command).
const (
	ReadGetRoom          = "GetRoom"
	ReadListBans         = "ListBans"
	ReadListRooms        = "ListRooms"
	ReadListSeatRequests = "ListSeatRequests"
	ReadListContributors = "ListContributors"
)

// IsRead reports whether an RPC is one of the reads of ClassRead.
func IsRead(rpc string) bool {
	switch rpc {
	case ReadGetRoom, ReadListBans, ReadListRooms, ReadListSeatRequests, ReadListContributors:
		return true
	}
	return false
}

// Scopes a refusal names: the caller's share (a user, or for a read
// without one the identity the server found: see grpcapi) or the app's
// whole bucket.
const (
	ScopeUser = "user"
	ScopeApp  = "app"
)

// Refusal says why a call was refused and when it may pass.
type Refusal struct {
	Class      string
	Scope      string // ScopeUser or ScopeApp
	RetryAfter time.Duration
}

type limits struct {
	user, app rate.Limit
	userBurst int
	appBurst  int
}

const (
	shards = 64
	// maxPerShard bounds a shard's buckets before idle ones are dropped.
	maxPerShard = 4096
)

type key struct {
	class, app, user string // user "" = the app's bucket
}

type shard struct {
	mu      sync.Mutex
	buckets map[key]*rate.Limiter
}

// Limiter is one node's buckets. The zero value is not usable: New.
type Limiter struct {
	classes map[string]limits
	seed    maphash.Seed
	shards  [shards]shard
	now     func() time.Time
}

// New returns the node's limiter for cfg, nil when cfg is off (a nil
// *Limiter allows everything).
func New(cfg configs.RateLimitConfig) *Limiter {
	if !cfg.Enabled {
		return nil
	}
	nodes := float64(max(cfg.Nodes, 1))
	share := func(burst int) int { return max(1, int(math.Ceil(float64(burst)/nodes))) }
	l := &Limiter{classes: map[string]limits{}, seed: maphash.MakeSeed(), now: time.Now}
	for name, c := range cfg.Classes() {
		l.classes[name] = limits{
			user: rate.Limit(c.UserPerSecond / nodes), userBurst: share(c.UserBurst),
			app: rate.Limit(c.AppPerSecond / nodes), appBurst: share(c.AppBurst),
		}
	}
	for i := range l.shards {
		l.shards[i].buckets = map[key]*rate.Limiter{}
	}
	return l
}

// WithClock replaces time.Now (tests).
func (l *Limiter) WithClock(now func() time.Time) *Limiter { l.now = now; return l }

// Allow takes one token of class from user's bucket and app's,
// or neither: ok false says which refused and when to retry. user "" is
// checked against the app's bucket alone; a caller always names one.
func (l *Limiter) Allow(appCode, user, class string) (Refusal, bool) {
	_, r, ok := l.Take(appCode, user, class)
	return r, ok
}

// Token is what Take took; Refund gives it back.
type Token struct {
	l         *Limiter
	user, app *rate.Limiter
	set       bool
}

// Take is Allow that also returns the token taken, for a call that turns
// out to have cost nothing (a command_id already answered).
func (l *Limiter) Take(appCode, user, class string) (Token, Refusal, bool) {
	if l == nil {
		return Token{}, Refusal{}, true
	}
	lim, ok := l.classes[class]
	if !ok {
		class, lim = ClassCommand, l.classes[ClassCommand]
	}
	now := l.now()
	var ub *rate.Limiter
	var ur *rate.Reservation
	if user != "" {
		// The caller's share first: refused there, it never touches the
		// app's bucket, so one caller cannot drain it for the others.
		ub = l.bucket(key{class, appCode, user}, lim.user, lim.userBurst, now)
		ur = ub.ReserveN(now, 1)
		if d := ur.DelayFrom(now); !ur.OK() || d > 0 {
			ur.CancelAt(now)
			return Token{}, Refusal{Class: class, Scope: ScopeUser, RetryAfter: retry(d)}, false
		}
	}
	ab := l.bucket(key{class: class, app: appCode}, lim.app, lim.appBurst, now)
	ar := ab.ReserveN(now, 1)
	if d := ar.DelayFrom(now); !ar.OK() || d > 0 {
		ar.CancelAt(now)
		if ur != nil {
			ur.CancelAt(now) // refused: the user's token goes back
		}
		return Token{}, Refusal{Class: class, Scope: ScopeApp, RetryAfter: retry(d)}, false
	}
	return Token{l: l, user: ub, app: ab, set: true}, Refusal{}, true
}

// Refund puts the token back in the buckets it came from (never past a
// bucket's burst). A zero Token, or a second Refund, does nothing.
func (t *Token) Refund() {
	if !t.set {
		return
	}
	t.set = false
	now := t.l.now()
	for _, b := range []*rate.Limiter{t.user, t.app} {
		if b != nil && b.TokensAt(now) <= float64(b.Burst())-1 {
			// A negative take adds a token: x/time/rate has no refund for
			// a reservation already used.
			b.AllowN(now, -1)
		}
	}
}

// retry rounds a wait up to whole milliseconds, at least one.
func retry(d time.Duration) time.Duration {
	return max(time.Millisecond, d.Round(time.Millisecond))
}

func (l *Limiter) bucket(k key, r rate.Limit, burst int, now time.Time) *rate.Limiter {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(k.class)
	h.WriteString(k.app)
	h.WriteString(k.user)
	sh := &l.shards[h.Sum64()%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[k]
	if b != nil {
		return b
	}
	if len(sh.buckets) >= maxPerShard {
		// A full bucket is the same as none: dropping it loses nothing.
		for bk, bb := range sh.buckets {
			if bb.TokensAt(now) >= float64(bb.Burst()) {
				delete(sh.buckets, bk)
			}
		}
	}
	b = rate.NewLimiter(r, burst)
	sh.buckets[k] = b
	return b
}

// Buckets counts the buckets held (tests, metrics).
func (l *Limiter) Buckets() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.buckets)
		sh.mu.Unlock()
	}
	return n
}
