package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// Guesses are the password-guess buckets of rooms (room.PasswordGuess*)
// in Redis, shared by every node: a room that moves to another node
// (failover, rebalance) keeps its guessers' buckets, and the refusal's
// wait is exact wherever it is answered. A bucket is one key holding the
// time it is full again in ms (GCRA: each wrong try adds one interval),
// expiring then, so a guesser who stops costs nothing after a minute.
// The time is the caller's clock, not Redis's.
type Guesses struct {
	c      goredis.UniversalClient
	prefix string
}

// Guesses are the buckets over the directory's client and key prefix.
func (d *Directory) Guesses() *Guesses { return &Guesses{c: d.c, prefix: d.opts.KeyPrefix} }

func (g *Guesses) key(key persistence.RoomKey, user string) string {
	return g.prefix + "pg:" + key.AppCode + ":" + key.RoomID + ":" + user
}

// Check refuses a try when the user's bucket is empty (RATE_LIMITED with
// the wait); an error of the unavailable class when Redis does not
// answer.
func (g *Guesses) Check(ctx context.Context, key persistence.RoomKey, user string, now time.Time) error {
	full, err := g.c.Get(ctx, g.key(key, user)).Int64()
	if errors.Is(err, goredis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redis password guesses: %w: %w", persistence.ErrUnavailable, err)
	}
	// Tokens now: burst - (full - now) / interval; a try needs one.
	if wait := time.Duration(full-now.UnixMilli())*time.Millisecond - (room.PasswordGuessBurst-1)*room.PasswordGuessEvery; wait > 0 {
		return errclass.WithRetryAfter(room.ErrRateLimited, wait)
	}
	return nil
}

// wrongScript: KEYS bucket; ARGV now ms, interval ms. The bucket's full
// time moves one interval on from itself or now, whichever is later.
var wrongScript = goredis.NewScript(`
local full = tonumber(redis.call('GET', KEYS[1]) or '0')
local now = tonumber(ARGV[1])
if full < now then full = now end
full = full + tonumber(ARGV[2])
redis.call('SET', KEYS[1], full, 'PX', full - now)
return full
`)

// Wrong spends a token of the user's bucket on a wrong password.
func (g *Guesses) Wrong(ctx context.Context, key persistence.RoomKey, user string, now time.Time) error {
	err := wrongScript.Run(ctx, g.c, []string{g.key(key, user)}, now.UnixMilli(), room.PasswordGuessEvery.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("redis password guesses: %w: %w", persistence.ErrUnavailable, err)
	}
	return nil
}
