package room

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// The node's store gate: one slow or timed-out call on a store that still
// answers never closes it (writes would be refused for nothing); a stall
// that a look at the store confirms closes it, every write is refused at
// once while it is closed, and the prober opens it as soon as the store
// answers again.
func TestStoreGateClosesOnlyOnAConfirmedOutage(t *testing.T) {
	var storeDown atomic.Bool
	g := &storeGate{timeout: time.Second, probe: func(ctx context.Context) error {
		if storeDown.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	stall := func() { g.lastDone.Store(time.Now().Add(-2 * storeStallAfter).UnixNano()) }

	// A call in flight for over a second, the store answering: admitted.
	if err := g.admit(); err != nil {
		t.Fatal(err)
	}
	stall()
	if err := g.admit(); err != nil {
		t.Fatalf("a slow call on a store that answers closed the gate: %v", err)
	}
	g.done(nil)
	// One call timed out, the store answering: still open.
	g.done(context.DeadlineExceeded)
	if err := g.admit(); err != nil {
		t.Fatalf("one timed-out call on a store that answers closed the gate: %v", err)
	}
	g.done(nil)

	// The store stops answering while a call waits.
	storeDown.Store(true)
	if err := g.admit(); err != nil {
		t.Fatal(err)
	}
	stall()
	start := time.Now()
	if err := g.admit(); !errors.Is(err, errStoreDown) {
		t.Fatalf("a confirmed stall: admit %v, want errStoreDown", err)
	}
	for range 100 {
		if err := g.admit(); !errors.Is(err, errStoreDown) {
			t.Fatalf("while closed: admit %v, want errStoreDown", err)
		}
	}
	if took := time.Since(start); took > storeConfirmTimeout+200*time.Millisecond {
		t.Fatalf("closing and 100 refusals took %s", took)
	}
	g.done(context.DeadlineExceeded) // the stalled call ends

	storeDown.Store(false)
	deadline := time.Now().Add(3 * time.Second)
	for g.admit() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the gate did not open after the store answered again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.done(nil)
}
