package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/room"
)

// Classes of commands; every command type not listed is ClassCommand.
const (
	ClassCreate     = "create"
	ClassJoin       = "join"
	ClassGift       = "gift"
	ClassModeration = "moderation"
	ClassCommand    = "command"
)

var classOf = map[string]string{
	room.CmdCreateRoom: ClassCreate, room.CmdReopenRoom: ClassCreate,
	room.CmdJoinRoom: ClassJoin, room.CmdLeaveRoom: ClassJoin,
	room.CmdSendGift: ClassGift,
	room.CmdKickUser: ClassModeration, room.CmdBanUser: ClassModeration, room.CmdUnbanUser: ClassModeration,
	room.CmdMuteMember: ClassModeration, room.CmdUnmuteMember: ClassModeration, room.CmdKickOffSeat: ClassModeration,
	room.CmdSetAdmin: ClassModeration, room.CmdRemoveAdmin: ClassModeration, room.CmdTransferOwner: ClassModeration,
	room.CmdCloseRoom: ClassModeration,
}

// ClassOf returns the class of a command type (room.Cmd*).
func ClassOf(cmdType string) string {
	if c, ok := classOf[cmdType]; ok {
		return c
	}
	return ClassCommand
}

// Scopes a refusal names.
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

// Allow takes one token of cmdType's class from user's bucket and app's,
// or neither: ok false says which refused and when to retry. user "" (a
// read without one) is checked against the app's bucket alone.
func (l *Limiter) Allow(appCode, user, cmdType string) (Refusal, bool) {
	if l == nil {
		return Refusal{}, true
	}
	class := ClassOf(cmdType)
	lim := l.classes[class]
	now := l.now()
	var ur *rate.Reservation
	if user != "" {
		ur = l.bucket(key{class, appCode, user}, lim.user, lim.userBurst, now).ReserveN(now, 1)
		if d := ur.DelayFrom(now); !ur.OK() || d > 0 {
			ur.CancelAt(now)
			return Refusal{Class: class, Scope: ScopeUser, RetryAfter: retry(d)}, false
		}
	}
	ar := l.bucket(key{class: class, app: appCode}, lim.app, lim.appBurst, now).ReserveN(now, 1)
	if d := ar.DelayFrom(now); !ar.OK() || d > 0 {
		ar.CancelAt(now)
		if ur != nil {
			ur.CancelAt(now) // refused: the user's token goes back
		}
		return Refusal{Class: class, Scope: ScopeApp, RetryAfter: retry(d)}, false
	}
	return Refusal{}, true
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
