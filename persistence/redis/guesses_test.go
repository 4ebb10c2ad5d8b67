package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/redis"
	"github.com/hyapp/roomcell/persistence/redis/redistest"
	"github.com/hyapp/roomcell/room"
)

type guessBuckets interface {
	Check(ctx context.Context, key persistence.RoomKey, user string, now time.Time) error
	Wrong(ctx context.Context, key persistence.RoomKey, user string, now time.Time) error
}

// The password-guess buckets in Redis answer as the ones in memory do,
// try for try and to the millisecond of the wait: a burst of wrong
// tries, then one an interval; a check spends nothing; rooms and users
// have buckets of their own. Two Guesses over one Redis (two nodes) are
// one bucket, and the key is gone once the bucket is full again.
func TestGuessBucketsInRedisAsInMemory(t *testing.T) {
	cfg := redistest.Config(t, "")
	d := redis.Open(cfg, redis.Options{})
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	r1, r2 := persistence.RoomKey{AppCode: "app", RoomID: "r1"}, persistence.RoomKey{AppCode: "app", RoomID: "r2"}
	t0 := time.UnixMilli(1_800_000_000_000)
	type step struct {
		at    time.Duration
		key   persistence.RoomKey
		user  string
		wrong bool // spend a token if the check passes
	}
	var steps []step
	for i := range room.PasswordGuessBurst + 2 {
		steps = append(steps, step{at: time.Duration(i) * time.Second, key: r1, user: "g", wrong: true})
	}
	steps = append(steps,
		step{at: 7 * time.Second, key: r1, user: "h"},                // another user
		step{at: 7 * time.Second, key: r2, user: "g"},                // another room
		step{at: 13 * time.Second, key: r1, user: "g", wrong: true},  // a token back
		step{at: 13500 * time.Millisecond, key: r1, user: "g"},       // none yet
		step{at: 90 * time.Second, key: r1, user: "g", wrong: true},  // full again
		step{at: 90 * time.Second, key: r1, user: "g", wrong: false}, // checks spend nothing
	)
	run := func(nodes ...guessBuckets) []string {
		var out []string
		for i, s := range steps {
			g := nodes[i%len(nodes)]
			err := g.Check(ctx, s.key, s.user, t0.Add(s.at))
			wait, _ := errclass.RetryAfterOf(err)
			switch {
			case err == nil && s.wrong:
				if err := g.Wrong(ctx, s.key, s.user, t0.Add(s.at)); err != nil {
					t.Fatal(err)
				}
				out = append(out, "wrong")
			case err == nil:
				out = append(out, "ok")
			case errors.Is(err, room.ErrRateLimited):
				out = append(out, "limited "+wait.String())
			default:
				t.Fatalf("step %d: %v", i, err)
			}
		}
		return out
	}
	want := run(memdb.NewGuesses())
	got := run(d.Guesses(), redis.Open(cfg, redis.Options{}).Guesses())
	if len(got) != len(want) {
		t.Fatalf("redis %v, memory %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("step %d: redis %q, memory %q (all: %v / %v)", i, got[i], want[i], got, want)
		}
	}
	if want[room.PasswordGuessBurst] != "limited 5s" || want[room.PasswordGuessBurst+1] != "limited 4s" || want[len(want)-2] != "wrong" {
		t.Fatalf("memory buckets: %v", want)
	}
	c := goredis.NewClient(&goredis.Options{Addr: cfg.Addr})
	defer c.Close()
	n, err := c.Keys(ctx, cfg.KeyPrefix+"pg:*").Result()
	if err != nil || len(n) != 1 {
		t.Fatalf("bucket keys %v, %v: want one (r1's g)", n, err)
	}
	if ttl := c.PTTL(ctx, n[0]).Val(); ttl <= 0 || ttl > room.PasswordGuessBurst*room.PasswordGuessEvery {
		t.Fatalf("bucket key expires in %v", ttl)
	}
}
