package relay

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// partialStore hands out at most three rows a claim, as a claim does when
// the rooms ahead are held by their publishers.
type partialStore struct {
	persistence.Store
	claims atomic.Int64
}

func (s *partialStore) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	s.claims.Add(1)
	return s.Store.ClaimPendingOutbox(ctx, owner, nowMs, leaseMs, min(limit, 3))
}

// A backlog whose claims all come back partial drains without waiting a
// poll between them. Before, only a full batch was followed at once: after
// a fault, when most claims are partial, the relay drained one partial
// claim per poll_interval (seconds per hundred rows) while new load kept
// coming.
func TestPartialClaimsDrainWithoutPolling(t *testing.T) {
	s := &partialStore{Store: newMemDB(t)}
	pendingJoins(t, s, "ev", 30)
	pub := newPublisher(nil)
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1",
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.PollInterval, c.BatchSize = time.Hour, 10 })})
	eventually(t, "backlog drained by partial claims", func() bool {
		st, err := s.OutboxStats(context.Background())
		return err == nil && st.Pending == 0
	})
	if n := pub.total(); n != 30 {
		t.Fatalf("%d publishes, want 30", n)
	}
}

// pausedStore refuses every write while paused, as a paused database
// does (after the store's timeout).
type pausedStore struct {
	persistence.Store
	paused atomic.Bool
}

var errPaused = errors.New("database paused")

func (s *pausedStore) MarkOutboxPublished(ctx context.Context, id string, nowMs int64) error {
	if s.paused.Load() {
		return errPaused
	}
	return s.Store.MarkOutboxPublished(ctx, id, nowMs)
}

func (s *pausedStore) MarkOutboxPublishedBatch(ctx context.Context, ids []string, nowMs int64) error {
	if s.paused.Load() {
		return errPaused
	}
	return s.Store.MarkOutboxPublishedBatch(ctx, ids, nowMs)
}

func (s *pausedStore) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	if s.paused.Load() {
		return nil, errPaused
	}
	return s.Store.ClaimPendingOutbox(ctx, owner, nowMs, leaseMs, limit)
}

// Events IM accepted while the database went away (their marks failed)
// are marked as soon as it is back, not sent again after their lease:
// their rooms are free again within a poll, and every event reached IM
// once. Before, the rows kept the relay's lease (30 s by default), held
// their rooms that long, and went out a second time.
func TestUnmarkedEventsMarkedWhenStoreReturns(t *testing.T) {
	s := &pausedStore{Store: newMemDB(t)}
	ids := pendingJoins(t, s, "ev", 5)
	var first atomic.Bool
	pub := newPublisher(func(context.Context, persistence.Envelope, int) error {
		// The database goes away while the first batch is at IM.
		if first.CompareAndSwap(false, true) {
			s.paused.Store(true)
		}
		return nil
	})
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	startRelay(t, newSystem(t), Deps{Store: s, Publisher: pub, NodeID: "n1", Metrics: m,
		Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.LeaseTTL = time.Hour })})
	eventually(t, "the first batch at IM", func() bool { return pub.total() == 5 })
	time.Sleep(200 * time.Millisecond) // several polls against the paused store
	back := time.Now()
	s.paused.Store(false)
	eventually(t, "every row marked published", func() bool {
		for _, id := range ids {
			if !published(t, s, id)() {
				return false
			}
		}
		return true
	})
	if took := time.Since(back); took > 2*time.Second {
		t.Fatalf("rows marked %v after the store came back; want within a few polls", took)
	}
	for _, id := range ids {
		if n := pub.attempts(id); n != 1 {
			t.Fatalf("%s sent %d times, want once", id, n)
		}
	}
	// Each row is counted once as sent, by the mark that landed: a
	// dashboard's sends never fall short of the rows published.
	if got := testutil.ToFloat64(m.Success); got != float64(len(ids)) {
		t.Fatalf("room_outbox_publish_success_total = %v after the late marks, want %d", got, len(ids))
	}
}
