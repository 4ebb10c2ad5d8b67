//go:build flood && !race

package main

import (
	"syscall"
	"testing"
)

// The full flood: 20,000 idle HTTP/2 connections from one address
// and 5,000 from 250 others, with the absolute p99 bound (100 ms). The
// flooding ends live in child processes (5,000 connections each), so the
// node's process holds only what it admits. It builds only with the tag
// flood and without the race detector (make flood, a stage of make test;
// about 15 s on two busy cores): under the detector the node's GC over
// the admitted connections' buffers (~45 KiB each) makes the p99 a
// measure of the detector.
func TestIdleConnectionFloodFull(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		t.Logf("RLIMIT_NOFILE of this process: soft %d, hard %d (each flood helper has its own)", lim.Cur, lim.Max)
	}
	runIdleFlood(t, floodPlan{oneAddr: 20000, many: 5000, manyAddrs: 250, shares: 4})
}
