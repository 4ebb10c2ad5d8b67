//go:build !race

package clustertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// likers like a room the victim node owns through the survivors, from
// before the victim's SIGKILL until after the room answers elsewhere:
// each like is retried under its command_id until it is acknowledged, as
// the client library does. An open window dies with the node unanswered
// (its likes are retried on the new activation); a window stored whose
// answers were lost is recognised by its receipts (the retries are
// duplicates). Either way the room's total is the likes sent, each
// counted once.
type likers struct {
	room  string
	via   *Node
	stop  atomic.Bool
	wg    sync.WaitGroup
	sent  atomic.Int64
	acked atomic.Int64
	dups  atomic.Int64
	retry atomic.Int64 // likes that needed more than one call
	// killedAt (unix ns) is set just before the kill; crossed counts the
	// likes sent before it and acknowledged after it.
	killedAt atomic.Int64
	crossed  atomic.Int64
	mu       sync.Mutex
	errs     []error
}

const likeUsers = 20

// startLikers creates a room the victim owns, has likeUsers members join
// it and like it (each several calls in flight) through via.
func startLikers(t *testing.T, via, victim *Node) *likers {
	t.Helper()
	l := &likers{via: via}
	rc := via.Rooms(t)
	call := func(what string, do func(ctx context.Context) error) error {
		var err error
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = do(ctx)
			cancel()
			if err == nil || !Retryable(err) {
				break
			}
			time.Sleep(max(RetryDelay(err), 100*time.Millisecond))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	for i := 0; l.room == "" && i < 200; i++ {
		r := fmt.Sprintf("liked-%d", i)
		if owner(t, via, r) == victim.ClusterAddr {
			l.room = r
		}
	}
	if l.room == "" {
		t.Fatal("no room of 200 placed on the victim")
	}
	err := call("create "+l.room, func(ctx context.Context) error {
		_, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "create-" + l.room, AppCode: App, RoomId: l.room, UserId: "owner", Name: l.room})
		return err
	})
	for u := range likeUsers {
		if err == nil {
			err = call("join", func(ctx context.Context) error {
				_, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: fmt.Sprintf("join-%d", u), AppCode: App, RoomId: l.room, UserId: fmt.Sprintf("liker-%d", u)})
				return err
			})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	for u := range likeUsers {
		for k := range 4 {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				for n := 0; !l.stop.Load(); n++ {
					id, count := fmt.Sprintf("like-%d-%d-%d", u, k, n), int64(1+(u+n)%5)
					l.sent.Add(count)
					var reply *v1.CommandReply
					calls, sentAt := 0, time.Now().UnixNano()
					err := call(id, func(ctx context.Context) (err error) {
						if calls++; calls == 2 {
							l.retry.Add(1)
						}
						reply, err = rc.LikeRoom(ctx, &v1.LikeRoomRequest{CommandId: id, AppCode: App, RoomId: l.room, UserId: fmt.Sprintf("liker-%d", u), Count: count})
						return err
					})
					if err != nil {
						l.mu.Lock()
						l.errs = append(l.errs, err)
						l.mu.Unlock()
						return
					}
					l.acked.Add(count)
					if k := l.killedAt.Load(); k != 0 && sentAt < k && time.Now().UnixNano() > k {
						l.crossed.Add(1)
					}
					if reply.GetDuplicate() {
						l.dups.Add(1)
					}
				}
			}()
		}
	}
	return l
}

// check stops new likes, waits for every like sent to be acknowledged
// and compares the room's total with them.
func (l *likers) check(t *testing.T) {
	t.Helper()
	l.stop.Store(true)
	l.wg.Wait()
	if len(l.errs) > 0 {
		t.Fatalf("likes not acknowledged: %v", l.errs[:min(len(l.errs), 5)])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := l.via.Rooms(t).GetRoom(ctx, &v1.GetRoomRequest{AppCode: App, RoomId: l.room})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("likes through the kill: %d sent, %d acknowledged (%d calls in flight at the kill, %d retried by the client, %d answers duplicates of a stored window), room's total %d",
		l.sent.Load(), l.acked.Load(), l.crossed.Load(), l.retry.Load(), l.dups.Load(), got.Room.Likes)
	if got.Room.Likes != l.sent.Load() || l.acked.Load() != l.sent.Load() || l.sent.Load() == 0 {
		t.Fatalf("room %s counts %d likes; %d sent, %d acknowledged", l.room, got.Room.Likes, l.sent.Load(), l.acked.Load())
	}
	if l.crossed.Load() == 0 {
		t.Fatalf("no like was in flight at the kill: the test did not test it")
	}
}
