package roomgrain

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Items posted from many goroutines each run once, one at a time, in the
// order each goroutine posted them.
func TestSerialRunsEachItemOnceInPostOrder(t *testing.T) {
	var s Serial
	const posters, each = 16, 500
	var mu sync.Mutex
	got := make([][]int, posters)
	var running, overlap atomic.Int32
	var done sync.WaitGroup
	done.Add(posters * each)
	var wg sync.WaitGroup
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if !s.Post(func() {
					if running.Add(1) > 1 {
						overlap.Add(1)
					}
					mu.Lock()
					got[p] = append(got[p], i)
					mu.Unlock()
					running.Add(-1)
					done.Done()
				}) {
					t.Error("post refused before stop")
				}
				if i%97 == 0 {
					time.Sleep(time.Microsecond) // let the runner go idle now and then
				}
			}
		}()
	}
	wg.Wait()
	done.Wait()
	if n := overlap.Load(); n != 0 {
		t.Fatalf("%d items ran while another was running", n)
	}
	for p, seq := range got {
		if len(seq) != each {
			t.Fatalf("poster %d: %d items ran, want %d", p, len(seq), each)
		}
		for i, v := range seq {
			if v != i {
				t.Fatalf("poster %d: item %d ran as the %dth", p, v, i)
			}
		}
	}
	// The last item's done.Done runs inside it: the runner still has to
	// find the queue empty and let go.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		idle := !s.running && s.queue == nil
		s.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a drained serial still holds a runner or a queue 2s after its last item")
		}
	}
}

// After stop nothing queued runs and new posts are refused; the item that
// was running finishes.
func TestSerialStopDropsQueuedWork(t *testing.T) {
	var s Serial
	release := make(chan struct{})
	started := make(chan struct{})
	var ran, finished atomic.Int32
	s.Post(func() {
		close(started)
		<-release
		finished.Add(1)
	})
	<-started
	for range 10 {
		s.Post(func() { ran.Add(1) })
	}
	s.Stop()
	close(release)
	if s.Post(func() { ran.Add(1) }) {
		t.Fatal("post accepted after stop")
	}
	deadline := time.Now().Add(2 * time.Second)
	for finished.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if finished.Load() != 1 {
		t.Fatal("the running item did not finish")
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d queued items ran after stop", n)
	}
}

// A panicking item is reported and the items after it still run.
func TestSerialPanicIsReportedAndWorkGoesOn(t *testing.T) {
	var s Serial
	panics := make(chan any, 1)
	s.Panicked = func(p any, stack []byte) {
		if len(stack) == 0 {
			t.Error("no stack")
		}
		panics <- p
	}
	after := make(chan struct{})
	s.Post(func() { panic("boom") })
	s.Post(func() { close(after) })
	select {
	case <-after:
	case <-time.After(2 * time.Second):
		t.Fatal("the item after a panic did not run")
	}
	if p := <-panics; p != "boom" {
		t.Fatalf("reported %v", p)
	}
}
