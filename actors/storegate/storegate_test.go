package storegate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/persistence"
)

// The node's store gate: one slow or timed-out call on a store that still
// answers never closes it (writes would be refused for nothing); a stall
// that a look at the store confirms closes it, every write is refused at
// once while it is closed, and the prober opens it as soon as the store
// answers again.
func TestStoreGateClosesOnlyOnAConfirmedOutage(t *testing.T) {
	var storeDown atomic.Bool
	g := &Gate{set: Settings{}.withDefaults(), probe: func(ctx context.Context) error {
		if storeDown.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	stall := func() { g.lastDone.Store(time.Now().Add(-2 * g.set.StallAfter).UnixNano()) }

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
	if took := time.Since(start); took > g.set.ProbeTimeout+200*time.Millisecond {
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
	g := &Gate{set: Settings{}.withDefaults(), probe: func(context.Context) error { return nil }}
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
// g.set.StallAfter + g.set.ProbeTimeout (plus scheduling), and the calls
// waiting on the store are abandoned then, not at their own deadline. A
// call that is merely slow on a store that answers is neither refused
// nor abandoned.
func TestStoreGateWatchdogClosesAndAbandonsStalledCalls(t *testing.T) {
	var storeDown atomic.Bool
	g := &Gate{set: Settings{}.withDefaults(), probe: func(ctx context.Context) error {
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

	// Slow on a store that answers: 3 × g.set.StallAfter with no call
	// finishing, the gate stays open and the call is not abandoned.
	slow, cancelSlow := context.WithCancel(context.Background())
	if err := g.admit(); err != nil {
		t.Fatal(err)
	}
	abandoned := context.AfterFunc(g.openCtx(), func() { t.Error("a slow call on a store that answers was abandoned") })
	time.Sleep(3 * g.set.StallAfter)
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
	bound := g.set.StallAfter + g.set.ProbeTimeout + 250*time.Millisecond
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

// stallStore is a store that stops answering while down: every call and
// probe waits until it answers again or its deadline passes. With
// failFast, a probe while down fails at once with an error that is
// neither a deadline nor a net.Error, as the MySQL driver's "invalid
// connection" after its own read timeout.
type stallStore struct {
	down     atomic.Bool
	failFast bool
	finds    atomic.Int64
}

func (f *stallStore) wait(ctx context.Context) error {
	for f.down.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

func (f *stallStore) Probe(ctx context.Context) error {
	if f.failFast && f.down.Load() {
		return errors.New("invalid connection")
	}
	return f.wait(ctx)
}

func (f *stallStore) FindCommand(context.Context, persistence.RoomKey, string) (persistence.CommandRecord, error) {
	f.finds.Add(1)
	return persistence.CommandRecord{}, persistence.ErrNotFound
}

// writers runs n writers through g until stop is closed, each call a
// store write of f under the 3 s store timeout; it records every call's
// start, duration and error.
type gateCall struct {
	at   time.Time
	took time.Duration
	err  error
}

func writers(g *Gate, f *stallStore, n int, stop chan struct{}) (wait func() []gateCall) {
	var mu sync.Mutex
	var calls []gateCall
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				at := time.Now()
				err := g.Call(3*time.Second, func(ctx context.Context) error {
					if err := f.wait(ctx); err != nil {
						return err
					}
					time.Sleep(time.Millisecond) // a write that answers
					return nil
				})
				mu.Lock()
				calls = append(calls, gateCall{at: at, took: time.Since(at), err: err})
				mu.Unlock()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	return func() []gateCall { wg.Wait(); return calls }
}

// A store whose writes stall under 200 concurrent writers: the gate
// closes within StallAfter + ProbeTimeout (plus scheduling) of the stall,
// no writer waits past that bound for any call (the ones caught in flight
// are abandoned, the later ones refused at once with ErrDown), and the
// gate opens within a probe of the store answering again, after which
// every call goes through. The probe is the store's own (Prober), never
// a command lookup.
func TestStoreGateBoundsEveryWriterOfAStalledStore(t *testing.T) {
	f := &stallStore{}
	g := New(f, Settings{}, nil)
	bound := g.set.StallAfter + g.set.ProbeTimeout + 250*time.Millisecond
	stop := make(chan struct{})
	wait := writers(g, f, 200, stop)
	time.Sleep(200 * time.Millisecond)
	f.down.Store(true)
	stalled := time.Now()
	var closedAfter time.Duration
	for !g.down.Load() {
		if closedAfter = time.Since(stalled); closedAfter > 3*time.Second {
			t.Fatal("the gate never closed on a stalled store")
		}
		time.Sleep(time.Millisecond)
	}
	closedAfter = time.Since(stalled)
	time.Sleep(time.Second)
	f.down.Store(false)
	answered := time.Now()
	var openedAfter time.Duration
	for g.down.Load() {
		if openedAfter = time.Since(answered); openedAfter > 3*time.Second {
			t.Fatal("the gate never opened after the store answered again")
		}
		time.Sleep(time.Millisecond)
	}
	openedAfter = time.Since(answered)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	calls := wait()

	var during, refused, abandoned, over, after, failedAfter int
	var slowest time.Duration
	for _, c := range calls {
		switch {
		case !c.at.Before(stalled) && c.at.Before(answered):
			during++
			slowest = max(slowest, c.took)
			if c.took > bound {
				over++
			}
			switch {
			case errors.Is(c.err, ErrDown):
				refused++
			case errors.Is(c.err, context.Canceled):
				abandoned++
			case c.err == nil && c.at.Add(c.took).After(answered):
			default:
				t.Errorf("a call during the stall answered %v after %s", c.err, c.took)
			}
		case c.at.After(answered.Add(openedAfter)):
			after++
			if c.err != nil {
				failedAfter++
			}
		}
	}
	t.Logf("200 writers: gate closed %s after the stall, opened %s after the store answered; %d calls during the stall (%d refused, %d abandoned, slowest %s; bound %s); %d after, %d failed",
		closedAfter.Round(time.Millisecond), openedAfter.Round(time.Millisecond), during, refused, abandoned, slowest.Round(time.Millisecond), bound, after, failedAfter)
	if closedAfter > bound {
		t.Errorf("the gate closed %s after the stall; want within %s", closedAfter, bound)
	}
	if over != 0 || refused == 0 || abandoned == 0 {
		t.Errorf("calls during the stall: %d over %s, %d refused, %d abandoned; want none over, both kinds", over, bound, refused, abandoned)
	}
	if openedAfter > ProbeEvery+250*time.Millisecond {
		t.Errorf("the gate opened %s after the store answered; want within %s", openedAfter, ProbeEvery+250*time.Millisecond)
	}
	if after == 0 || failedAfter != 0 {
		t.Errorf("after the gate opened: %d calls, %d failed", after, failedAfter)
	}
	if n := f.finds.Load(); n != 0 {
		t.Errorf("the gate looked %d commands up; a Prober store is asked its own probe", n)
	}
}

// A probe that fails at once while the store is away (the driver's
// "invalid connection" after its own read timeout, not a deadline) is no
// answer: the gate stays closed for as long as the store is away, and
// opens only once a probe is answered.
func TestStoreGateStaysClosedWhileProbesFail(t *testing.T) {
	f := &stallStore{failFast: true}
	g := New(f, Settings{}, nil)
	stop := make(chan struct{})
	wait := writers(g, f, 20, stop)
	time.Sleep(100 * time.Millisecond)
	f.down.Store(true)
	time.Sleep(g.set.StallAfter + g.set.ProbeTimeout + 250*time.Millisecond)
	if !g.down.Load() {
		t.Fatal("the gate did not close on a stalled store whose probe fails")
	}
	for range 8 * int(ProbeEvery/(50*time.Millisecond)) {
		if !g.down.Load() {
			t.Fatal("the gate opened while the store was away (a failed probe taken for an answer)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.down.Store(false)
	deadline := time.Now().Add(ProbeEvery + 250*time.Millisecond)
	for g.down.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the gate did not open after the store answered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wait()
}

// A store that flaps (away 600 ms, back 600 ms, four times) under 50
// writers: no call waits past the bound in any phase, every phase away
// closes the gate and every phase back opens it.
func TestStoreGateFlapping(t *testing.T) {
	f := &stallStore{}
	g := New(f, Settings{}, nil)
	bound := g.set.StallAfter + g.set.ProbeTimeout + 250*time.Millisecond
	stop := make(chan struct{})
	wait := writers(g, f, 50, stop)
	time.Sleep(100 * time.Millisecond)
	for cycle := range 4 {
		f.down.Store(true)
		time.Sleep(bound)
		if !g.down.Load() {
			t.Errorf("cycle %d: the gate was open %s into the store's absence", cycle, bound)
		}
		time.Sleep(600*time.Millisecond - bound)
		f.down.Store(false)
		time.Sleep(ProbeEvery + 250*time.Millisecond)
		if g.down.Load() {
			t.Errorf("cycle %d: the gate was closed %s after the store came back", cycle, ProbeEvery+250*time.Millisecond)
		}
		time.Sleep(600*time.Millisecond - ProbeEvery - 250*time.Millisecond)
	}
	close(stop)
	var over int
	var slowest time.Duration
	calls := wait()
	for _, c := range calls {
		slowest = max(slowest, c.took)
		if c.took > bound {
			over++
		}
	}
	t.Logf("%d calls over four flaps, slowest %s (bound %s)", len(calls), slowest.Round(time.Millisecond), bound)
	if over != 0 {
		t.Errorf("%d calls waited over %s while the store flapped (slowest %s)", over, bound, slowest)
	}
}
