package roomgrain

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence/redis"
	"github.com/hyapp/roomcell/persistence/redis/redistest"
	"github.com/hyapp/roomcell/room"
)

// A room that moves to another node keeps its guessers' buckets: the
// buckets are in Redis, which every node reads. A guesser who spent the
// burst on one node is refused on the next one, with the same exact
// wait, and gets no try more for the move; without the wiring's buckets
// a password join is refused, never checked unlimited.
func TestPasswordGuessBucketFollowsTheRoom(t *testing.T) {
	cfg := redistest.Config(t, "")
	// The clock is read by the grains' goroutines (the mark batcher
	// among them) while the test moves it.
	var nowMS atomic.Int64
	nowMS.Store(1_800_000_000_000)
	node := func(f *fixture) *fixture {
		dir := redis.Open(cfg, redis.Options{})
		t.Cleanup(func() { dir.Close() })
		f.deps.Guesses = dir.Guesses()
		f.deps.Config.PasswordKey = strings.Repeat("k", 32)
		f.deps.Clock = func() time.Time { return time.UnixMilli(nowMS.Load()) }
		return f
	}
	a := node(newFixture(t))
	try := func(f *fixture, pid *actor.PID, n int) error {
		_, err := f.do(pid, wrap(&v1.JoinRoomRequest{CommandId: fmt.Sprintf("g%d", n), AppCode: "app", RoomId: "r1", UserId: "guesser", Password: fmt.Sprint("guess-", n)}))
		return err
	}
	pa := a.activate("app/r1")
	a.mustDo(pa, wrap(&v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: "r1", UserId: "owner", Name: "locked"}))
	a.mustDo(pa, wrap(&v1.SetRoomPasswordRequest{CommandId: "p1", AppCode: "app", RoomId: "r1", UserId: "owner", Password: "sesame"}))
	for n := range room.PasswordGuessBurst {
		if err := try(a, pa, n); !errors.Is(err, room.ErrWrongPassword) {
			t.Fatalf("try %d on the first node: %v", n, err)
		}
	}
	if err := a.sys.Root.PoisonFuture(pa).Wait(); err != nil {
		t.Fatal(err)
	}
	nowMS.Add((3 * time.Second).Milliseconds())

	// The second node: the same room database, its own Redis client.
	b := newFixture(t)
	b.store = a.store
	b.deps.Store = a.store
	withGate(&b.deps)
	b = node(b)
	pb := b.activate("app/r1")
	for n := range 3 {
		err := try(b, pb, 100+n)
		if d, ok := errclass.RetryAfterOf(err); !errors.Is(err, room.ErrRateLimited) || !ok || d != room.PasswordGuessEvery-3*time.Second {
			t.Fatalf("try %d after the move: %v (wait %v), want RATE_LIMITED with %v", n, err, d, room.PasswordGuessEvery-3*time.Second)
		}
	}
	nowMS.Add((room.PasswordGuessEvery - 3*time.Second).Milliseconds())
	if err := try(b, pb, 200); !errors.Is(err, room.ErrWrongPassword) {
		t.Fatalf("a token back after the interval: %v", err)
	}
	if err := try(b, pb, 201); !errors.Is(err, room.ErrRateLimited) {
		t.Fatalf("one token only: %v", err)
	}

	// A node given no buckets refuses the try (unavailable): a password
	// is never checked unlimited.
	c := newFixture(t)
	c.store = a.store
	c.deps.Store = a.store
	withGate(&c.deps)
	c.deps.Guesses = nil
	c.deps.Config.PasswordKey = strings.Repeat("k", 32)
	pc := c.activate("app/r2")
	c.mustDo(pc, wrap(&v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: "r2", UserId: "owner", Name: "locked"}))
	c.mustDo(pc, wrap(&v1.SetRoomPasswordRequest{CommandId: "p1", AppCode: "app", RoomId: "r2", UserId: "owner", Password: "sesame"}))
	_, err := c.do(pc, wrap(&v1.JoinRoomRequest{CommandId: "j", AppCode: "app", RoomId: "r2", UserId: "guesser", Password: "sesame"}))
	if !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("a join with the password on a node without buckets: %v, want unavailable", err)
	}
}
