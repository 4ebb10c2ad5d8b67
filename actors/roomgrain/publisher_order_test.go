package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/room"

	"github.com/hyapp/roomcell/persistence"
)

// orderPublisher records the events it delivered, in delivery order, and
// lets a test fail or hold chosen events.
type orderPublisher struct {
	mu        sync.Mutex
	delivered []string
	failOnce  map[string]bool          // event ids failed on their first attempt
	gate      map[string]chan struct{} // event ids held until the channel closes
	entered   chan string              // event ids that reached a gate
}

func newOrderPublisher() *orderPublisher {
	return &orderPublisher{failOnce: map[string]bool{}, gate: map[string]chan struct{}{}, entered: make(chan string, 16)}
}

func (p *orderPublisher) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	p.mu.Lock()
	g := p.gate[env.EventID]
	delete(p.gate, env.EventID)
	fail := p.failOnce[env.EventID]
	delete(p.failOnce, env.EventID)
	p.mu.Unlock()
	if g != nil {
		p.entered <- env.EventID
		<-g
	}
	if fail {
		return errors.New("im down")
	}
	p.mu.Lock()
	p.delivered = append(p.delivered, env.EventID)
	p.mu.Unlock()
	return nil
}

// firsts is the delivered ids without repeats (clients drop repeats).
func (p *orderPublisher) firsts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return firstsOf(p.delivered)
}

// firstsOf is ids without repeats, each at its first place.
func firstsOf(ids []string) []string {
	var out []string
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// waitDelivered waits (under the publisher's 5 s lease, after which
// the relay would send a forgotten row late) until want were delivered,
// and fails unless they came first in exactly that order.
func (p *orderPublisher) waitDelivered(t *testing.T, want []string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for len(p.firsts()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := p.firsts(); !slices.Equal(got, want) {
		t.Fatalf("IM got %v, want %v", got, want)
	}
}

func imIDs(seqIdx ...[2]int) []string {
	out := make([]string, len(seqIdx))
	for i, si := range seqIdx {
		out[i] = room.EventID("app", "r1", int64(si[0]), si[1])
	}
	return out
}

// A command's events share one room_seq. The publisher used to skip every
// event of a command after its first as "already sent" (it compared each
// seq with the highest seq it had just queued), leaving it leased to
// itself and unsent while later commands went out; the relay sent it only
// after the lease, behind them. Here the inline RoomCreated fails, so the
// publisher child gets [RoomCreated, RoomUserJoined] both at seq 1.
func TestPublisherSendsEveryEventOfACommand(t *testing.T) {
	f := newFixture(t)
	pub := newOrderPublisher()
	pub.failOnce[room.EventID("app", "r1", 1, 0)] = true
	f.deps.Publisher = pub
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("c2", "bob"))
	pub.waitDelivered(t, imIDs([2]int{1, 0}, [2]int{1, 1}, [2]int{2, 0}))
	for _, id := range imIDs([2]int{1, 0}, [2]int{1, 1}, [2]int{2, 0}) {
		waitFor(t, func() bool { return publishedRow(f, id) })
	}
}

// unknownOutcomeStore commits the append of seq failSeq and then reports
// an error, as a commit whose acknowledgement was lost.
type unknownOutcomeStore struct {
	Store
	failSeq int64
}

func (s *unknownOutcomeStore) Append(ctx context.Context, a persistence.Append) error {
	if err := s.Store.Append(ctx, a); err != nil {
		return err
	}
	if a.Command.Seq == s.failSeq {
		return fmt.Errorf("commit acknowledgement lost: %w", context.DeadlineExceeded)
	}
	return nil
}

// The interleaving behind a once-flaky order test: a catch-up claims
// the room's rows, then, while it is still sending them, an append whose
// outcome is unknown commits seq 4 (leased to the publisher, never handed
// to it) and the grain, seeing seq 5 not follow what it handed, breaks the
// publisher's order. The catch-up used to end by switching in-order mode
// back on over that break, so seq 5 was sent at once and seq 4 only after
// its lease, by the relay: IM got 5 before 4.
func TestPublisherCatchUpDoesNotOverrideALaterBreak(t *testing.T) {
	f := newFixture(t)
	pub := newOrderPublisher()
	seq2 := room.EventID("app", "r1", 2, 0)
	pub.failOnce[seq2] = true // out of in-order mode
	gate := make(chan struct{})
	f.deps.Publisher = pub
	f.deps.Store = &unknownOutcomeStore{Store: f.store, failSeq: 4}
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("c2", "bob")) // seq 2 fails: the next rows go through a catch-up
	waitFor(t, func() bool {
		r, err := f.store.GetOutbox(context.Background(), seq2)
		return err == nil && r.LockUntilMs == 0 // given back after its failure
	})
	pub.mu.Lock()
	pub.gate[seq2] = gate // the catch-up for seq 3 holds on seq 2, its claim done
	pub.mu.Unlock()
	f.mustDo(pid, rcJoin("c3", "carol"))
	select {
	case <-pub.entered:
	case <-time.After(3 * time.Second):
		t.Fatal("catch-up did not start")
	}
	if _, err := f.do(pid, rcJoin("c4", "dave")); err == nil {
		t.Fatal("the append of seq 4 should have reported an unknown outcome")
	}
	if r := f.mustDo(pid, rcJoin("c5", "erin")); r.RoomSeq != 5 {
		t.Fatalf("erin's join got seq %d, want 5 (seq 4 was committed)", r.RoomSeq)
	}
	close(gate)
	want := imIDs([2]int{1, 0}, [2]int{1, 1}, [2]int{2, 0}, [2]int{3, 0}, [2]int{4, 0}, [2]int{5, 0})
	pub.waitDelivered(t, want)
	for _, id := range want {
		waitFor(t, func() bool { return publishedRow(f, id) })
	}
}

func publishedRow(f *fixture, id string) bool {
	r, err := f.store.GetOutbox(context.Background(), id)
	return err == nil && r.Status == persistence.OutboxPublished
}
