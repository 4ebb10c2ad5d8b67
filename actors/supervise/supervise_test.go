package supervise

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/internal/logtest"
)

func newSystem(t *testing.T) *actor.ActorSystem {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(sys.Shutdown)
	return sys
}

// syncBuffer is a log sink the logging goroutines write while the test reads.
type syncBuffer = logtest.Buffer

// A child that panics is restarted by the Supervisor's strategy, and the
// restart is logged with the panic value and its stack.
func TestSupervisorRestartsAndLogsPanic(t *testing.T) {
	sys := newSystem(t)
	var buf syncBuffer
	defer LogEvents(sys, slog.New(slog.NewTextHandler(&buf, nil)))()
	sup, err := NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 10)
	child, err := sup.Spawn("worker", actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			started <- struct{}{}
		case string:
			func() {
				defer func() {
					if r := recover(); r != nil {
						Repanic(r)
					}
				}()
				panic("kaboom")
			}()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if child.Id != "workers/worker" {
		t.Fatalf("child id %q, want workers/worker", child.Id)
	}
	<-started
	sys.Root.Send(child, "crash")
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("child was not restarted")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "kaboom") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	out := buf.String()
	for _, want := range []string{"actor failed", "workers/worker", "RestartDirective", "panic: kaboom", "supervise_test.go"} {
		if !strings.Contains(out, want) {
			t.Fatalf("supervisor log lacks %q:\n%s", want, out)
		}
	}
	if _, err := sup.Spawn("worker", actor.PropsFromFunc(func(actor.Context) {})); err == nil {
		t.Fatal("spawning a second child with the same name must fail")
	}
	if err := StopAndWait(sys, child, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := sup.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// StopAndWait waits for the message in progress and the ones queued before
// the poison pill, and gives up with ErrStopTimeout when that takes longer.
func TestStopAndWait(t *testing.T) {
	sys := newSystem(t)
	var mu sync.Mutex
	var handled []string
	slow := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if s, ok := c.Message().(string); ok {
			time.Sleep(150 * time.Millisecond)
			mu.Lock()
			handled = append(handled, s)
			mu.Unlock()
		}
	}))
	sys.Root.Send(slow, "a")
	sys.Root.Send(slow, "b")
	if err := StopAndWait(sys, slow, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if strings.Join(handled, ",") != "a,b" {
		t.Fatalf("handled %v before stopping, want a,b", handled)
	}
	mu.Unlock()
	// Already gone: returns at once.
	if err := StopAndWait(sys, slow, time.Second); err != nil {
		t.Fatalf("stopping a dead actor: %v", err)
	}

	release := make(chan struct{})
	stuck := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(string); ok {
			<-release
		}
	}))
	sys.Root.Send(stuck, "x")
	start := time.Now()
	err := StopAndWait(sys, stuck, 200*time.Millisecond)
	if !errors.Is(err, ErrStopTimeout) || time.Since(start) > 3*time.Second {
		t.Fatalf("stuck actor: %v after %s, want ErrStopTimeout after about 200ms", err, time.Since(start))
	}
	close(release)
}

// A Ticker keeps at most one tick pending, and only its own ticks are
// Owned.
func TestTickerSinglePendingAndOwnership(t *testing.T) {
	sys := newSystem(t)
	ticks := make(chan *Tick, 100)
	var ticker Ticker
	other := &Tick{id: 1 << 60}
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			for range 10 {
				ticker.Schedule(c, 30*time.Millisecond)
			}
		case *Tick:
			if ticker.Owns(m) {
				ticks <- m
			}
		case string:
			c.Send(c.Self(), other)
		case *actor.Stopping:
			ticker.Cancel()
		}
	}))
	sys.Root.Send(pid, "foreign tick")
	select {
	case <-ticks:
	case <-time.After(5 * time.Second):
		t.Fatal("no tick")
	}
	select {
	case m := <-ticks:
		t.Fatalf("a second tick %v arrived: Schedule must replace the pending one", m)
	case <-time.After(300 * time.Millisecond):
	}
	if err := StopAndWait(sys, pid, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var fresh Ticker
	if fresh.Owns(other) || fresh.Owns(nil) {
		t.Fatal("a Ticker that never scheduled owns nothing")
	}
}

// Fallbacks fills only what is unset: a given logger and clock are kept.
func TestFallbacks(t *testing.T) {
	var l *slog.Logger
	var c func() time.Time
	Fallbacks(&l, &c)
	if l != slog.Default() || c == nil || time.Since(c()) > time.Minute {
		t.Fatalf("unset: logger %p (want slog.Default()), clock set %v", l, c != nil)
	}
	mine := slog.New(slog.DiscardHandler)
	fixed := time.UnixMilli(42)
	l, c = mine, func() time.Time { return fixed }
	Fallbacks(&l, &c)
	if l != mine || !c().Equal(fixed) {
		t.Fatal("a given logger or clock was replaced")
	}
}
