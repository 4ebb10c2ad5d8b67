package room

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// markAudit is a store that checks every mark against what IM accepted and
// counts the writes. failMarks makes every batched mark fail without
// writing, as a process that died between the send and the mark.
type markAudit struct {
	Store
	pub       *orderPublisher
	failMarks atomic.Bool

	mu         sync.Mutex
	early      []string // marked before IM accepted them
	single     int      // MarkOutboxPublished calls
	batches    int      // MarkOutboxPublishedBatch calls that wrote
	batchedIDs int
}

func (s *markAudit) check(ids []string) {
	s.pub.mu.Lock()
	defer s.pub.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(s.pub.delivered, id) {
			s.early = append(s.early, id)
		}
	}
}

func (s *markAudit) MarkOutboxPublished(ctx context.Context, id string, nowMs int64) error {
	s.check([]string{id})
	s.mu.Lock()
	s.single++
	s.mu.Unlock()
	return s.Store.MarkOutboxPublished(ctx, id, nowMs)
}

func (s *markAudit) MarkOutboxPublishedBatch(ctx context.Context, ids []string, nowMs int64) error {
	if s.failMarks.Load() {
		return errors.New("process died before the mark")
	}
	s.check(ids)
	s.mu.Lock()
	s.batches++
	s.batchedIDs += len(ids)
	s.mu.Unlock()
	return s.Store.MarkOutboxPublishedBatch(ctx, ids, nowMs)
}

// roomEventIDs lists the room's outbox event ids in (room_seq, index)
// order, and how many are still pending.
func roomEventIDs(t *testing.T, f *fixture) (ids []string, pending int) {
	t.Helper()
	rows, err := f.store.ListOutbox(context.Background(), persistence.OutboxFilter{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rows, func(a, b persistence.OutboxRow) int {
		if a.Envelope.RoomSeq != b.Envelope.RoomSeq {
			return int(a.Envelope.RoomSeq - b.Envelope.RoomSeq)
		}
		return cmpStr(a.Envelope.EventID, b.Envelope.EventID)
	})
	for _, r := range rows {
		ids = append(ids, r.Envelope.EventID)
		if r.Status == persistence.OutboxPending {
			pending++
		}
	}
	return ids, pending
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Marks are batched and never run ahead of IM: 8 writers join and leave
// one room concurrently while IM fails one event in 7 on its first try.
// Every mark the store sees is of an event IM had already accepted; the
// publisher writes marks in batches (no single-row marks, fewer writes
// than events); IM got every event once at least, first deliveries in
// room order; nothing stays pending.
func TestPublisherBatchesMarksBehindIMUnderFailures(t *testing.T) {
	f := newFixture(t)
	pub := newOrderPublisher()
	audit := &markAudit{Store: f.store, pub: pub}
	f.deps.Publisher = pub
	f.deps.Store = audit
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	// Room seqs are known only after the commands; fail by a random draw
	// on the event id instead, decided before the send.
	rng := rand.New(rand.NewPCG(1, 2))
	pub.mu.Lock()
	for seq := 2; seq < 2000; seq++ {
		if rng.IntN(7) == 0 {
			pub.failOnce[EventID("app", "r1", int64(seq), 0)] = true
		}
	}
	pub.mu.Unlock()

	const writers, rounds = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", w)
			for k := range rounds {
				rc := rcJoin(fmt.Sprintf("w%d-%d", w, k), user)
				if k%2 == 1 {
					rc = rcLeave(fmt.Sprintf("w%d-%d", w, k), user)
				}
				res, err := f.sys.Root.RequestFuture(pid, rc, 5*time.Second).Result()
				if err == nil {
					_, err = replyOf(res)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", user, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A failure near the end leaves rows for the relay (none here): one
	// more command's catch-up takes them, after their release.
	pub.mu.Lock()
	clear(pub.failOnce)
	pub.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	f.mustDo(pid, rcJoin("last", "zed"))

	want, _ := roomEventIDs(t, f)
	pub.waitDelivered(t, want)
	waitFor(t, func() bool { _, p := roomEventIDs(t, f); return p == 0 })
	audit.mu.Lock()
	defer audit.mu.Unlock()
	if len(audit.early) > 0 {
		t.Fatalf("%d rows marked published before IM accepted them: %v", len(audit.early), audit.early)
	}
	if audit.single != 0 {
		t.Fatalf("%d single-row marks: want every mark batched", audit.single)
	}
	if audit.batches >= audit.batchedIDs {
		t.Fatalf("%d mark writes for %d rows: want fewer writes than rows", audit.batches, audit.batchedIDs)
	}
	t.Logf("%d events, %d marked in %d writes", len(want), audit.batchedIDs, audit.batches)
}

// A publisher that dies between the send and its batched mark (here: the
// mark write never lands, then the grain and its publisher are stopped)
// loses nothing: the rows stay pending under the publisher's lease, no
// other sender takes them before it ends, and after it a relay claims
// every one of them, in room order.
func TestPublisherCrashBeforeBatchedMarkLeavesRowsToTheRelay(t *testing.T) {
	f := newFixture(t)
	pub := newOrderPublisher()
	audit := &markAudit{Store: f.store, pub: pub}
	audit.failMarks.Store(true)
	f.deps.Publisher = pub
	f.deps.Store = audit
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	for i := range 20 {
		f.mustDo(pid, rcJoin(fmt.Sprintf("c%d", i+2), fmt.Sprintf("u%d", i)))
	}
	want, _ := roomEventIDs(t, f)
	pub.waitDelivered(t, want) // IM has them all
	if err := f.sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	now := time.Now()
	early, err := f.store.ClaimPendingOutbox(ctx, "relay-1", now.UnixMilli(), 30_000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(early) != 0 {
		t.Fatalf("a relay claimed %d rows under the publisher's lease", len(early))
	}
	after := now.Add(leaseTTL(f.deps) + time.Second)
	rows, err := f.store.ClaimPendingOutbox(ctx, "relay-1", after.UnixMilli(), 30_000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Envelope.EventID)
	}
	// Every mark failed, so every row, RoomCreated included, is the
	// relay's.
	if !slices.Equal(got, want) {
		t.Fatalf("relay claimed %v, want every row of the room in order %v", got, want)
	}
	if err := f.store.MarkOutboxPublishedBatch(ctx, got, after.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, pending := roomEventIDs(t, f); pending != 0 {
		t.Fatalf("%d rows still pending after the relay's round", pending)
	}
}
