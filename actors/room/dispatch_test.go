package room

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every scheduled turn starts at once, even while all the pool's
// goroutines are blocked in turns of their own: a room blocked on its
// store must hold up no other room.
func TestWorkerPoolNeverQueuesATurn(t *testing.T) {
	p := newWorkerPool(time.Minute)
	const n = 64
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		p.Schedule(func() {
			started.Done()
			<-release // blocked, like a store call
		})
	}
	done := make(chan struct{})
	go func() { started.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("not every turn started while the others were blocked")
	}
	close(release)
}

// Turns that follow one another run on goroutines the pool kept, and the
// kept ones end once idle.
func TestWorkerPoolReusesAndRetiresGoroutines(t *testing.T) {
	p := newWorkerPool(200 * time.Millisecond)
	base := runtime.NumGoroutine()
	var ran atomic.Int64
	ids := map[string]bool{} // goroutines the turns ran on
	for range 1000 {
		done := make(chan struct{})
		var id string
		p.Schedule(func() { ran.Add(1); id = goroutineID(); close(done) })
		<-done
		ids[id] = true
		// Let the worker get back to waiting for the next turn.
		for i := 0; i < 100 && runtime.NumGoroutine() > base+1; i++ {
			runtime.Gosched()
		}
	}
	if ran.Load() != 1000 {
		t.Fatalf("%d turns ran, want 1000", ran.Load())
	}
	if len(ids) > 4 {
		t.Fatalf("1000 sequential turns ran on %d goroutines; the pool does not reuse them", len(ids))
	}
	if extra := runtime.NumGoroutine() - base; extra > 4 {
		t.Fatalf("%d goroutines more after 1000 sequential turns; the pool does not reuse them", extra)
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines more 3s after the last turn; idle workers do not end", runtime.NumGoroutine()-base)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// goroutineID is the running goroutine's id, from its stack header
// ("goroutine 18 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	return string(f[1])
}
