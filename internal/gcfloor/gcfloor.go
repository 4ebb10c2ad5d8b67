package gcfloor

import (
	"errors"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the percent for a floor past 40 GiB (the heap minimum
// reaches any floor under that first).
const maxPercent = 1_000_000

// What the runtime's goal is made of (percentFor).
var sampled = []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// gogcMetric is the GC percent in force (GOGC or SetGCPercent; -1 for off,
// as a uint64).
const gogcMetric = "/gc/gogc:percent"

// ErrRunning is returned by Start while another floor is kept: the GC
// percent is one per process, and two tuners would undo each other.
var ErrRunning = errors.New("gcfloor: already running")

var (
	mu      sync.Mutex
	current *tuner
)

// tuner re-reads the live heap after every GC cycle and sets the least GC
// percent whose next goal reaches floor, never below the percent the
// process started with.
type tuner struct {
	floor   uint64
	base    int
	set     int
	stopped bool
	sample  []metrics.Sample
}

// sentinel is garbage made on purpose: its cleanup runs once per GC cycle
// that finds it unreachable, and makes the next one. It is larger than
// the tiny allocator's 16 bytes, whose blocks may never be collected.
type sentinel struct{ _ [32]byte }

// Start keeps the heap goal at floor bytes or more until stop is called,
// which gives back the GC percent the process had. With floor 0, or with
// the GC off (GOGC=off), it changes nothing.
func Start(floor uint64) (stop func(), err error) {
	mu.Lock()
	defer mu.Unlock()
	if current != nil {
		return nil, ErrRunning
	}
	g := []metrics.Sample{{Name: gogcMetric}}
	metrics.Read(g)
	base := int(int64(g[0].Value.Uint64()))
	if floor == 0 || base < 0 {
		return func() {}, nil
	}
	t := &tuner{floor: floor, base: base, set: base, sample: make([]metrics.Sample, len(sampled))}
	for i, name := range sampled {
		t.sample[i].Name = name
	}
	current = t
	t.tuneLocked()
	arm(t)
	return t.stop, nil
}

func arm(t *tuner) {
	runtime.AddCleanup(new(sentinel), afterGC, t)
}

// afterGC runs on the runtime's cleanup goroutine after each cycle.
func afterGC(t *tuner) {
	mu.Lock()
	defer mu.Unlock()
	if t.stopped {
		return
	}
	t.tuneLocked()
	arm(t)
}

func (t *tuner) tuneLocked() {
	metrics.Read(t.sample)
	var v [3]uint64
	for i, s := range t.sample {
		if s.Value.Kind() != metrics.KindUint64 {
			return // a runtime without these metrics: leave GOGC alone
		}
		v[i] = s.Value.Uint64()
	}
	p := percentFor(v[0], v[0]+v[1]+v[2], t.floor, t.base)
	if p != t.set {
		debug.SetGCPercent(p)
		t.set = p
	}
}

// heapMinimum is the runtime's least goal at GOGC=100 (defaultHeapMinimum,
// 4 MiB), scaled by GOGC like the rest: over a near-empty heap it, not the
// live heap, sets the goal.
const heapMinimum = 4 << 20

// percentFor is the least percent, not below base, whose goal reaches
// floor. The runtime's goal is the larger of live + scanned × percent/100
// (scanned: live heap, stacks and globals) and heapMinimum × percent/100.
func percentFor(live, scanned, floor uint64, base int) int {
	if live == 0 || live >= floor || scanned < live {
		return base
	}
	// Rounded up, so the goal is not a byte short of the floor.
	want := ((floor-live)*100 + scanned - 1) / scanned
	if byMinimum := (floor*100 + heapMinimum - 1) / heapMinimum; byMinimum < want {
		want = byMinimum
	}
	if want > maxPercent {
		want = maxPercent
	}
	if int(want) < base {
		return base
	}
	return int(want)
}

func (t *tuner) stop() {
	mu.Lock()
	defer mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	debug.SetGCPercent(t.base)
	current = nil
}
