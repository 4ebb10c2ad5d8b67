package memdb

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// maxGuessBuckets bounds the buckets kept: past it, the full ones
// (nobody guessed lately) are dropped.
const maxGuessBuckets = 10_000

// Guesses are the password-guess buckets of rooms (room.PasswordGuess*)
// in this process's memory: a single node's (dev, tests). A room that
// moves to another process starts its guessers with fresh buckets there;
// a cluster keeps them in Redis (persistence/redis.Guesses), where they
// follow the room.
type Guesses struct {
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// NewGuesses makes an empty set of buckets.
func NewGuesses() *Guesses { return &Guesses{buckets: map[string]*rate.Limiter{}} }

func guessKey(key persistence.RoomKey, user string) string {
	return key.AppCode + "/" + key.RoomID + "/" + user
}

func (g *Guesses) bucket(key string, now time.Time) *rate.Limiter {
	b := g.buckets[key]
	if b == nil {
		if len(g.buckets) >= maxGuessBuckets {
			for k, old := range g.buckets {
				if old.TokensAt(now) >= room.PasswordGuessBurst {
					delete(g.buckets, k)
				}
			}
		}
		b = rate.NewLimiter(rate.Every(room.PasswordGuessEvery), room.PasswordGuessBurst)
		g.buckets[key] = b
	}
	return b
}

// Check refuses a try when the user's bucket is empty, with the wait.
func (g *Guesses) Check(_ context.Context, key persistence.RoomKey, user string, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.bucket(guessKey(key, user), now)
	if b.TokensAt(now) >= 1 {
		return nil
	}
	wait := time.Duration((1 - b.TokensAt(now)) * float64(room.PasswordGuessEvery))
	return errclass.WithRetryAfter(room.ErrRateLimited, wait)
}

// Wrong spends a token of the user's bucket on a wrong password.
func (g *Guesses) Wrong(_ context.Context, key persistence.RoomKey, user string, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.bucket(guessKey(key, user), now).AllowN(now, 1)
	return nil
}
