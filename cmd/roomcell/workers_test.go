package main

import (
	"testing"

	"github.com/hyapp/roomcell/configs"
)

// Every entry of the worker list is whole (a name, a gate, a start and a
// stop timeout) and names its worker once: Shutdown, the start-step log
// and /readyz tell workers apart by name.
func TestWorkerListEntriesAreWholeAndNamedOnce(t *testing.T) {
	if len(workerList) < 6 {
		t.Fatalf("%d workers in the list, want at least the 6 roomcell runs", len(workerList))
	}
	a := &App{cfg: configs.Default()}
	seen := map[string]bool{}
	for _, w := range workerList {
		if w.name == "" || w.enabled == nil || w.start == nil || w.stopTimeout == nil {
			t.Fatalf("incomplete worker entry %+v", w)
		}
		if seen[w.name] {
			t.Fatalf("worker %s listed twice", w.name)
		}
		seen[w.name] = true
		if d := w.stopTimeout(a); d <= 0 {
			t.Fatalf("worker %s stops within %s", w.name, d)
		}
	}
}
