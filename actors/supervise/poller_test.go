package supervise

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// The restart delay doubles from Initial and stops at Max.
func TestRestartPolicyDelay(t *testing.T) {
	p := RestartPolicy{Initial: 10 * time.Millisecond, Max: 70 * time.Millisecond}.normalized()
	want := []time.Duration{10, 20, 40, 70, 70, 70}
	for i, w := range want {
		if got := p.delay(i + 1); got != w*time.Millisecond {
			t.Fatalf("delay(%d) = %s, want %s", i+1, got, w*time.Millisecond)
		}
	}
	if d := p.delay(1 << 20); d != 70*time.Millisecond {
		t.Fatalf("delay after many failures = %s, want the cap", d)
	}
}

// A poller runs its round at once and after the delay it returns, answers
// RunNow with the round's result, gets a fresh round (New) after a panic,
// is listed as down while its restart waits, and stops with Stop even then.
func TestPollerRoundRestartAndStop(t *testing.T) {
	sys := newSystem(t)
	sup, err := NewWorkerSupervisor(sys, "workers", RestartPolicy{Initial: 300 * time.Millisecond, Max: time.Second}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var incarnations, rounds atomic.Int64
	var crash atomic.Bool
	p, err := StartPoller(sup, PollerSpec[int64]{Name: "w", New: func() Round[int64] {
		n := incarnations.Add(1)
		return func(context.Context) (time.Duration, int64) {
			if crash.CompareAndSwap(true, false) {
				panic("round bug")
			}
			rounds.Add(1)
			return time.Hour, n
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.RunNow(5 * time.Second)
	if err != nil || res != 1 || rounds.Load() != 2 {
		t.Fatalf("RunNow = %v %v after %d rounds, want incarnation 1's result after the start round and this one", res, err, rounds.Load())
	}
	crash.Store(true)
	p.Kick()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(sup.Health().Down(), "w") {
		if time.Now().After(deadline) {
			t.Fatal("the crashed poller was never listed as down")
		}
		time.Sleep(time.Millisecond)
	}
	if p.Running() {
		t.Fatal("Running while the restart waits")
	}
	for !p.Running() {
		if time.Now().After(deadline) {
			t.Fatal("the poller was not restarted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if incarnations.Load() != 2 || sup.Health().Restarts("w") != 1 {
		t.Fatalf("%d incarnations, %d restarts after one panic, want 2 and 1", incarnations.Load(), sup.Health().Restarts("w"))
	}
	// Stop while a restart is pending still stops it.
	crash.Store(true)
	p.Kick()
	for !slices.Contains(sup.Health().Down(), "w") {
		if time.Now().After(deadline) {
			t.Fatal("second crash not seen")
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatalf("stop while down: %v", err)
	}
	if len(sup.Health().Down()) != 0 {
		t.Fatalf("a stopped poller is listed as down: %v", sup.Health().Down())
	}
}
