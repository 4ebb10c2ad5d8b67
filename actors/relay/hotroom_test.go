package relay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// limitStore records the limit of every claim.
type limitStore struct {
	persistence.Store
	mu     sync.Mutex
	limits []int
}

func (s *limitStore) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	s.mu.Lock()
	s.limits = append(s.limits, limit)
	s.mu.Unlock()
	return s.Store.ClaimPendingOutbox(ctx, owner, nowMs, leaseMs, limit)
}

func (s *limitStore) seen() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.limits)
}

// hotRoom inserts n joins of one room, seq 1..n.
func hotRoom(t *testing.T, s persistence.Store, roomID string, n int) {
	t.Helper()
	for i := range n {
		e := joined(t, fmt.Sprintf("%s-%04d", roomID, i), clockBase+int64(i))
		e.RoomID, e.RoomSeq = roomID, int64(i+1)
		insert(t, s, e)
	}
}

// A room with a backlog: each full claim it dominates doubles the next,
// up to hot_room_batch; the backlog drains in fewer claims.
func TestHotRoomClaimGrows(t *testing.T) {
	s := &limitStore{Store: newMemDB(t)}
	hotRoom(t, s, "hot", 600)
	pub := newPublisher(nil)
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig(func(c *configs.OutboxWorkerConfig) {
		c.BatchSize, c.HotRoomBatch, c.PollInterval = 10, 80, time.Hour
	})})
	eventually(t, "the hot room drained", func() bool { return pub.total() == 600 })
	got := s.seen()
	if want := []int{10, 20, 40, 80, 80, 80}; len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Fatalf("claim limits %v, want them to start %v", got, want)
	}
	if len(got) > 12 {
		t.Fatalf("%d claims for 600 rows, want about 600/80 + the ramp", len(got))
	}
	for _, l := range got {
		if l > 80 {
			t.Fatalf("a claim of %d rows, over hot_room_batch 80", l)
		}
	}
}

// No hot room (many rooms, none with half a claim), or hot_room_batch =
// batch_size (the old behaviour), or a failure: the claim stays at
// batch_size.
func TestHotRoomClaimStaysWithoutBacklogOrAfterFailure(t *testing.T) {
	t.Run("many small rooms", func(t *testing.T) {
		s := &limitStore{Store: newMemDB(t)}
		for r := range 60 {
			hotRoom(t, s, fmt.Sprint("r", r), 4)
		}
		pub := newPublisher(nil)
		startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig(func(c *configs.OutboxWorkerConfig) {
			c.BatchSize, c.HotRoomBatch, c.PollInterval = 10, 80, time.Hour
		})})
		eventually(t, "drained", func() bool { return pub.total() == 240 })
		for _, l := range s.seen() {
			if l != 10 {
				t.Fatalf("claim limits %v: grew without a hot room", s.seen())
			}
		}
	})
	t.Run("old behaviour", func(t *testing.T) {
		s := &limitStore{Store: newMemDB(t)}
		hotRoom(t, s, "hot", 100)
		pub := newPublisher(nil)
		startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1", Config: testConfig(func(c *configs.OutboxWorkerConfig) {
			c.BatchSize, c.HotRoomBatch, c.PollInterval = 10, 10, time.Hour
		})})
		eventually(t, "drained", func() bool { return pub.total() == 100 })
		for _, l := range s.seen() {
			if l != 10 {
				t.Fatalf("claim limits %v with hot_room_batch = batch_size", s.seen())
			}
		}
	})
	t.Run("failure resets", func(t *testing.T) {
		cfg := testConfig(func(c *configs.OutboxWorkerConfig) { c.BatchSize, c.HotRoomBatch = 10, 80 })
		grown := Result{Limit: 40, Published: 40, HotRoomRows: 40}
		if n := nextLimit(cfg, grown, nil); n != 80 {
			t.Fatalf("after a full hot batch of 40: %d, want 80", n)
		}
		failed := grown
		failed.Published, failed.Failed = 39, 1
		if n := nextLimit(cfg, failed, nil); n != 10 {
			t.Fatalf("after a failure: %d, want batch_size 10", n)
		}
		if n := nextLimit(cfg, grown, context.Canceled); n != 10 {
			t.Fatalf("after a claim error: %d, want batch_size 10", n)
		}
	})
}
