package storegate

import (
	"context"
	"errors"
	"strings"
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
	g := &Gate{timeout: time.Second, probe: func(ctx context.Context) error {
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
	if err := g.admit(); !errors.Is(err, ErrDown) {
		t.Fatalf("a confirmed stall: admit %v, want ErrDown", err)
	}
	for range 100 {
		if err := g.admit(); !errors.Is(err, ErrDown) {
			t.Fatalf("while closed: admit %v, want ErrDown", err)
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

// A room database that did not answer when the node started: its gate is
// closed from the first call, the refusal names the database, and it
// stays closed while the store answers but is not attached (its schema
// may not be there yet); once attached it opens within a probe or two.
func TestStoreGateOfADatabaseNotYetAttached(t *testing.T) {
	var attached atomic.Bool
	g := &Gate{timeout: time.Second, probe: func(context.Context) error { return nil }}
	g.ForDatabase("b", attached.Load)
	err := g.admit()
	if !errors.Is(err, ErrDown) || !strings.Contains(err.Error(), `room database "b"`) {
		t.Fatalf("first call: %v, want ErrDown naming room database \"b\"", err)
	}
	time.Sleep(3 * ProbeEvery)
	if err := g.admit(); !errors.Is(err, ErrDown) {
		t.Fatalf("a store that answers but is not attached opened the gate: %v", err)
	}
	attached.Store(true)
	deadline := time.Now().Add(3 * ProbeEvery)
	for g.admit() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the gate did not open once the database was attached")
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.done(nil)
}

// The store stops answering while calls are in flight and no new call
// comes: the watchdog alone notices, confirms and closes the gate within
// storeStallAfter + storeConfirmTimeout (plus scheduling), and the calls
// waiting on the store are abandoned then, not at their own deadline. A
// call that is merely slow on a store that answers is neither refused
// nor abandoned.
func TestStoreGateWatchdogClosesAndAbandonsStalledCalls(t *testing.T) {
	var storeDown atomic.Bool
	g := &Gate{timeout: time.Second, probe: func(ctx context.Context) error {
		if storeDown.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	// inFlight admits one call and waits on it as a store call would:
	// until its 3 s deadline or until the gate abandons it.
	inFlight := func() (took chan time.Duration) {
		if err := g.admit(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		stop := context.AfterFunc(g.openCtx(), cancel)
		took = make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			defer stop()
			defer cancel()
			<-ctx.Done()
			g.done(ctx.Err())
			took <- time.Since(start)
		}()
		return took
	}

	// Slow on a store that answers: 3 × storeStallAfter with no call
	// finishing, the gate stays open and the call is not abandoned.
	slow, cancelSlow := context.WithCancel(context.Background())
	if err := g.admit(); err != nil {
		t.Fatal(err)
	}
	abandoned := context.AfterFunc(g.openCtx(), func() { t.Error("a slow call on a store that answers was abandoned") })
	time.Sleep(3 * storeStallAfter)
	if g.down.Load() {
		t.Fatal("the watchdog closed the gate on a store that answers")
	}
	abandoned()
	cancelSlow()
	<-slow.Done()
	g.done(nil)

	storeDown.Store(true)
	start := time.Now()
	calls := []chan time.Duration{inFlight(), inFlight(), inFlight()}
	bound := storeStallAfter + storeConfirmTimeout + 250*time.Millisecond
	for i, c := range calls {
		select {
		case d := <-c:
			if d > bound {
				t.Errorf("call %d waited %s on the stalled store; want abandoned within %s", i, d, bound)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d was never abandoned", i)
		}
	}
	if !g.down.Load() {
		t.Fatal("the calls ended but the gate is open")
	}
	if err := g.admit(); !errors.Is(err, ErrDown) {
		t.Fatalf("after the watchdog closed the gate: admit %v, want ErrDown", err)
	}
	t.Logf("gate closed and 3 stalled calls abandoned %s after the store stopped answering (bound %s)", time.Since(start).Round(time.Millisecond), bound)

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
