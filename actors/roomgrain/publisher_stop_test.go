package roomgrain

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// A grain stopped while its publisher still has rows queued (its shard
// went to another node, or it passivated): the queued rows are not sent
// by the stopped publisher, and they are given back to the relay as soon
// as the send under way finishes, not after their lease; the room's next
// activation then sends every event once, in room order.
func TestStoppedPublisherGivesItsQueuedRowsBack(t *testing.T) {
	f := newFixture(t)
	pub := newOrderPublisher()
	gate := make(chan struct{})
	held := room.EventID("app", "r1", 2, 0)
	pub.gate[held] = gate // the first join holds the publisher
	f.deps.Publisher = pub
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("c2", "u0"))
	select {
	case <-pub.entered:
	case <-time.After(3 * time.Second):
		t.Fatal("publisher did not start the first join")
	}
	const queued = 20
	for i := range queued {
		f.mustDo(pid, rcJoin(fmt.Sprintf("q%d", i), fmt.Sprintf("u%d", i+1)))
	}
	if err := f.sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	before := len(pub.firsts())
	close(gate)
	released := time.Now()

	// Pending and leased to nobody well within the rows' lease.
	leased := func() (n int) {
		rows, err := f.store.ListOutbox(context.Background(), persistence.OutboxFilter{Limit: 10_000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Status == persistence.OutboxPending && r.LockedBy != "" {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(time.Second)
	for leased() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := leased(); n != 0 {
		t.Fatalf("%d rows still leased to the stopped publisher %s after its last send; want 0 (the lease is %s)",
			n, time.Since(released).Round(time.Millisecond), leaseTTL(&f.deps))
	}
	// The stopped publisher sent nothing but the send it had under way.
	if got := pub.firsts(); len(got) != before+1 || got[len(got)-1] != held {
		t.Fatalf("the stopped publisher delivered %v after the stop; want only %s", got[before:], held)
	}

	// The next activation's catch-up sends the rest, once, in order.
	pid = f.activate("app/r1")
	f.mustDo(pid, rcJoin("after", "late"))
	want, _ := roomEventIDs(t, f)
	pub.waitDelivered(t, want)
	if !slices.Equal(pub.firsts(), want) {
		t.Fatalf("IM got %v, want %v", pub.firsts(), want)
	}
}
