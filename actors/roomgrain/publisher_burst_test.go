package roomgrain

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// slowEnqueuer is an Enqueuer that sends one event at a time, each after
// delay, in the order queued (one room's IM queue), and counts every send.
type slowEnqueuer struct {
	delay time.Duration
	jobs  chan func()
	mu    sync.Mutex
	sent  []string
	count map[string]int
}

func newSlowEnqueuer(t *testing.T, delay time.Duration) *slowEnqueuer {
	e := &slowEnqueuer{delay: delay, jobs: make(chan func(), 100_000), count: map[string]int{}}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case j := <-e.jobs:
				j()
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done) })
	return e
}

func (e *slowEnqueuer) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	ch := make(chan error, 1)
	e.jobs <- func() {
		time.Sleep(e.delay)
		if err := ctx.Err(); err != nil {
			ch <- err
			return
		}
		e.mu.Lock()
		e.sent = append(e.sent, env.EventID)
		e.count[env.EventID]++
		e.mu.Unlock()
		ch <- nil
	}
	return ch
}

func (e *slowEnqueuer) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	return <-e.Enqueue(ctx, env)
}

// A hot room's first burst: commands come faster than IM takes their
// events, the publisher's backlog overflows while its first sends are
// still at IM, and its catch-up claims the room's rows. The catch-up must
// not send again the rows still in flight: every event reaches IM exactly
// once, in room order. (Before, the catch-up's claim handed back the
// in-flight rows, leased to the same publisher, and sent them a second
// time: ~0.4% of a hot room's events, all in its first 0.3 s.)
func TestHotRoomBurstSendsEachEventOnce(t *testing.T) {
	f := newFixture(t)
	f.deps.MaxPublishBacklog = 8
	pub := newSlowEnqueuer(t, 2*time.Millisecond)
	f.deps.Publisher = pub
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c0", "owner"))
	const joins = 120
	for i := range joins {
		f.mustDo(pid, rcJoin(fmt.Sprintf("c%d", i+1), fmt.Sprintf("u%d", i)))
	}
	want, _ := roomEventIDs(t, f)
	deadline := time.Now().Add(10 * time.Second)
	for {
		pub.mu.Lock()
		n := len(pub.count)
		pub.mu.Unlock()
		if n >= len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("IM got %d of %d events", n, len(want))
		}
		// A last command lets a catch-up pick up whatever overflowed.
		f.mustDo(pid, rcGet())
		time.Sleep(20 * time.Millisecond)
	}
	pub.mu.Lock()
	defer pub.mu.Unlock()
	var twice []string
	for id, n := range pub.count {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	if len(twice) > 0 {
		slices.Sort(twice)
		t.Fatalf("%d of %d events sent more than once: %v", len(twice), len(want), twice)
	}
	if !slices.Equal(pub.sent, want) {
		t.Fatalf("IM order %v, want room order %v", pub.sent, want)
	}
}

// markFailStore fails every published mark while failing is set (the
// database paused between a send and its mark).
type markFailStore struct {
	persistence.Store
	mu      sync.Mutex
	failing bool
}

func (s *markFailStore) MarkOutboxPublishedBatch(ctx context.Context, ids []string, nowMs int64) error {
	s.mu.Lock()
	failing := s.failing
	s.mu.Unlock()
	if failing {
		return fmt.Errorf("mark: %w", persistence.ErrUnavailable)
	}
	return s.Store.MarkOutboxPublishedBatch(ctx, ids, nowMs)
}

func (s *markFailStore) set(on bool) {
	s.mu.Lock()
	s.failing = on
	s.mu.Unlock()
}

// Events sent in order whose marks failed (the database went away after
// the send) are picked up by the room's next command, not left pending
// under the publisher's lease while it keeps sending the room's new
// events: no relay takes a room whose newest rows its publisher holds,
// so before they waited until the room went quiet (minutes under load).
// Every row ends published within a few commands, and IM got every event
// in room order (a repeat of an unmarked one is allowed: clients drop it
// by event_id).
func TestUnmarkedEventsCaughtUpUnderLoad(t *testing.T) {
	f := newFixture(t)
	store := &markFailStore{Store: f.store}
	f.deps.Store = store
	pub := newSlowEnqueuer(t, 0)
	f.deps.Publisher = pub
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c0", "owner"))
	store.set(true)
	for i := range 10 {
		f.mustDo(pid, rcJoin(fmt.Sprintf("a%d", i), fmt.Sprintf("a%d", i)))
	}
	time.Sleep(100 * time.Millisecond) // the marks fail
	store.set(false)
	n := 0
	waitFor(t, func() bool {
		// The load goes on, a join every poll, while the rows whose marks
		// failed (seq 2..11) must end published.
		f.mustDo(pid, rcJoin(fmt.Sprintf("b%d", n), fmt.Sprintf("b%d", n)))
		n++
		rows, err := f.store.ListOutbox(context.Background(), persistence.OutboxFilter{Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Envelope.RoomSeq <= 11 && r.Status == persistence.OutboxPending {
				return false
			}
		}
		return true
	})
	waitFor(t, func() bool { _, pending := roomEventIDs(t, f); return pending == 0 })
	want, _ := roomEventIDs(t, f)
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if firsts := firstsOf(pub.sent); !slices.Equal(firsts, want) {
		t.Fatalf("IM first deliveries %v, want room order %v", firsts, want)
	}
}
