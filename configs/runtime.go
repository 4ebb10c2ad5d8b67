package configs

// RuntimeConfig is the runtime block: the Go runtime settings the server
// process sets for itself (GOGC and GOMEMLIMIT stay the environment's).
type RuntimeConfig struct {
	// GCHeapFloorMB: while the live heap is small the GC lets the heap
	// grow to this many MiB before it collects, instead of to twice the
	// live heap; above the floor GOGC rules, and GOMEMLIMIT caps the heap
	// either way. Default 512 (set by the loader); 0 turns it off; negative
	// is refused.
	GCHeapFloorMB *int `yaml:"gc_heap_floor_mb"`
}

// DefaultGCHeapFloorMB is runtime.gc_heap_floor_mb's default: on MariaDB
// (live heap 30-90 MB under load) it cut the server's CPU per JoinRoom by
// a fifth (docs/benchmarks-history.md, eleventh round), at the cost of up to this
// much heap on an idle node.
const DefaultGCHeapFloorMB = 512

// maxGCHeapFloorMB (1 TiB) catches a floor given in bytes or KB.
const maxGCHeapFloorMB = 1 << 20

func (c *RuntimeConfig) setDefaults() {
	if c.GCHeapFloorMB == nil {
		v := DefaultGCHeapFloorMB
		c.GCHeapFloorMB = &v
	}
}

func (c RuntimeConfig) validate() error {
	if c.GCHeapFloorMB == nil {
		return nil
	}
	switch v := *c.GCHeapFloorMB; {
	case v < 0:
		return errorf("runtime.gc_heap_floor_mb", "negative (%d); 0 turns the floor off", v)
	case v > maxGCHeapFloorMB:
		return errorf("runtime.gc_heap_floor_mb", "%d MiB is over 1 TiB: the key is in MiB", v)
	}
	return nil
}

// GCHeapFloorBytes is the floor in bytes (0: off, and for a config that
// did not come through the loader, which is what sets the default).
func (c RuntimeConfig) GCHeapFloorBytes() uint64 {
	if c.GCHeapFloorMB == nil {
		return 0
	}
	return uint64(*c.GCHeapFloorMB) << 20
}
