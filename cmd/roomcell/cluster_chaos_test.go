//go:build !race

// Multi-process tests on cluster/clustertest: three roomcell processes on
// MariaDB and etcd, killed, frozen and cut off while clients use them.
// Built without -race (the processes are not built with it, and the race
// pass would run them twice); `make multimember` runs them.

package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clusterBinDir holds the roomcell binary clustertest builds, shared by
// every cluster test of the run (a test's own TempDir would vanish with
// it while the build is cached for the next). It is named after this
// process, and the directories of test processes that are gone are
// removed here: without a TestMain nothing else would remove them.
var clusterBinDir = sync.OnceValue(func() string {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "roomcell-clusterbin-*"))
	for _, d := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "roomcell-clusterbin-"))
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(d)
		}
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("roomcell-clusterbin-%d", os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	return dir
})

// chaosLong reports whether the long forms run (the env var is set to 1).
func chaosLong(env string) bool { return os.Getenv(env) == "1" }

// durations summarises a sample: n, min, median, p90 and max.
func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0"
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("n=%d min %s median %s p90 %s max %s", len(s), s[0].Round(time.Millisecond), at(0.5).Round(time.Millisecond),
		at(0.9).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// counts formats a tally in key order.
func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
