package gcfloor

import (
	"errors"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		name                 string
		live, scanned, floor uint64
		base, want           int
	}{
		{"nothing measured yet", 0, 0, 256 * mib, 100, 100},
		{"live at the floor", 256 * mib, 260 * mib, 256 * mib, 100, 100},
		{"live above the floor", 1024 * mib, 1030 * mib, 256 * mib, 100, 100},
		{"quarter of the floor", 64 * mib, 64 * mib, 256 * mib, 100, 300},
		{"stacks and globals count", 64 * mib, 96 * mib, 256 * mib, 100, 200},
		{"goal over base already reaches it", 200 * mib, 200 * mib, 256 * mib, 100, 100},
		{"user's larger GOGC kept", 64 * mib, 64 * mib, 256 * mib, 500, 500},
		{"rounded up, not down", 3 * mib, 3 * mib, 10 * mib, 100, 234},
		{"near-empty heap: the heap minimum reaches it", 128 << 10, 300 << 10, 512 * mib, 100, 12800},
		{"bounded", 1, 1, 1 << 50, 100, maxPercent},
		{"inconsistent sample ignored", 64 * mib, 1, 256 * mib, 100, 100},
	} {
		got := percentFor(c.live, c.scanned, c.floor, c.base)
		if got != c.want {
			t.Errorf("%s: percentFor(%d, %d, %d, %d) = %d, want %d", c.name, c.live, c.scanned, c.floor, c.base, got, c.want)
		}
		goal := max(c.live+c.scanned*uint64(got)/100, heapMinimum*uint64(got)/100)
		if c.live > 0 && c.scanned >= c.live && got < maxPercent && goal < c.floor {
			t.Errorf("%s: goal %d under the floor %d", c.name, goal, c.floor)
		}
	}
}

func read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func gogc() int { return int(int64(read(gogcMetric))) }

// eventually runs GC cycles until ok holds: the tuner reacts on the
// runtime's cleanup goroutine, after a cycle, not within runtime.GC.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s (GOGC %d, goal %d MiB, live %d MiB)", what, gogc(), read("/gc/heap/goal:bytes")/mib, read("/gc/heap/live:bytes")/mib)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGoalFollowsTheLiveHeap(t *testing.T) {
	base := gogc()
	const floor = 64 * mib
	stop, err := Start(floor)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// A test binary's live heap is a few MB: the goal must be raised to
	// the floor, where GOGC alone would collect at twice the live heap.
	eventually(t, "goal raised to the floor", func() bool {
		return read("/gc/heap/goal:bytes") >= floor && gogc() > base
	})
	// To the floor, not past it: stacks and globals are in the runtime's
	// goal too, and a tuner that left them out overshoots by their share.
	if goal := read("/gc/heap/goal:bytes"); goal > floor+floor/20 {
		t.Errorf("goal %d MiB over a %d MiB floor (GOGC %d, live %d, stacks %d, globals %d)", goal/mib, floor/mib, gogc(), read("/gc/heap/live:bytes"), read("/gc/scan/stack:bytes"), read("/gc/scan/globals:bytes"))
	}

	// Live data past the floor: GOGC is back in charge, goal ≈ 2 × live.
	held := make([][]byte, 96)
	for i := range held {
		held[i] = make([]byte, mib)
	}
	eventually(t, "base GOGC over a live heap above the floor", func() bool { return gogc() == base })
	if goal, live := read("/gc/heap/goal:bytes"), read("/gc/heap/live:bytes"); goal > 3*live {
		t.Errorf("goal %d MiB over a live heap of %d MiB: the floor still inflates it", goal/mib, live/mib)
	}
	runtime.KeepAlive(held)
	held = nil

	eventually(t, "floor again once the data is gone", func() bool {
		return read("/gc/heap/goal:bytes") >= floor && gogc() > base
	})
	stop()
	if got := gogc(); got != base {
		t.Errorf("after stop GOGC = %d, want the process's %d", got, base)
	}
	// A stopped tuner stays stopped through later cycles.
	stillBase(t, base)
}

// stillBase runs a few cycles, giving a stray tuner its chance to react,
// and checks the process's own GC percent held.
func stillBase(t *testing.T, base int) {
	t.Helper()
	for range 3 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := gogc(); got != base {
		t.Errorf("GOGC = %d after the tuner stopped, want the process's %d", got, base)
	}
}

func TestOneTunerAtATime(t *testing.T) {
	base := gogc()
	var wg sync.WaitGroup
	var mu sync.Mutex
	started, refused := 0, 0
	// Starts and stops from many goroutines while others allocate: never
	// two tuners, and the percent comes back to the process's own.
	done := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sink []byte
			for {
				select {
				case <-done:
					runtime.KeepAlive(sink)
					return
				default:
					sink = make([]byte, 64<<10)
				}
			}
		}()
	}
	var starters sync.WaitGroup
	for range 8 {
		starters.Add(1)
		go func() {
			defer starters.Done()
			for range 50 {
				stop, err := Start(32 * mib)
				mu.Lock()
				if errors.Is(err, ErrRunning) {
					refused++
				} else if err != nil {
					t.Error(err)
				} else {
					started++
				}
				mu.Unlock()
				if err == nil {
					time.Sleep(time.Millisecond)
					stop()
					stop() // twice is harmless
				}
			}
		}()
	}
	starters.Wait()
	close(done)
	wg.Wait()
	if started == 0 || started+refused != 400 {
		t.Fatalf("started %d, refused %d of 400", started, refused)
	}
	stillBase(t, base)
}

func TestGCOffIsLeftOff(t *testing.T) {
	prev := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(prev)
	stop, err := Start(64 * mib)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GOGC=off became %d", got)
	}
	// And a second Start is not refused: nothing is running.
	stop2, err := Start(64 * mib)
	if err != nil {
		t.Errorf("Start while GC is off and no tuner runs: %v", err)
	} else {
		stop2()
	}
}

func TestZeroFloorChangesNothing(t *testing.T) {
	base := gogc()
	stop, err := Start(0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if got := gogc(); got != base {
		t.Errorf("floor 0 set GOGC %d, want %d", got, base)
	}
}

// The floor must not lift a memory limit: under GOMEMLIMIT below the
// floor, churning allocations still runs the GC often (a tuner that
// turned the GC off, or raised the limit to the floor, would let the heap
// grow to the floor between cycles).
func TestMemoryLimitStillCaps(t *testing.T) {
	const floor, limit = 512 * mib, 48 * mib
	prev := debug.SetMemoryLimit(limit)
	defer debug.SetMemoryLimit(prev)
	stop, err := Start(floor)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	eventually(t, "floor in force", func() bool { return gogc() > 100 })
	before := read("/gc/cycles/total:gc-cycles")
	var peak uint64
	var sink [][]byte
	for i := range 2048 { // 1 GiB in all, 16 MiB held at a time
		if len(sink) == 32 {
			sink = sink[:0]
		}
		sink = append(sink, make([]byte, 512<<10))
		if i%64 == 0 {
			if h := read("/memory/classes/heap/objects:bytes"); h > peak {
				peak = h
			}
		}
	}
	runtime.KeepAlive(sink)
	cycles := read("/gc/cycles/total:gc-cycles") - before
	if cycles < 10 {
		t.Errorf("%d GC cycles for 1 GiB under a %d MiB limit: the floor (%d MiB) overrode it", cycles, limit/mib, floor/mib)
	}
	// The limit is soft (the runtime lets the heap past it rather than
	// spend over half the CPU in GC), so the peak is held to the floor's
	// side of it: without the limit this loop grows the heap to the floor.
	if peak > floor*3/4 {
		t.Errorf("heap objects peaked at %d MiB under a %d MiB limit: the floor (%d MiB) overrode it", peak/mib, limit/mib, floor/mib)
	}
}
