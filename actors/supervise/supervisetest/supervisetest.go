// Package supervisetest holds the checks every worker's restart test
// makes: whether a worker was ever reported down (what /readyz reads) and
// what roomcell_worker_restarts_total says.
package supervisetest

import (
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/supervise"
)

// WatchDown polls h until the returned stop is called; stop reports
// whether worker was ever listed as down (waiting for a restart) meanwhile.
func WatchDown(h *supervise.Health, worker string) (stop func() bool) {
	var saw atomic.Bool
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			if slices.Contains(h.Down(), worker) {
				saw.Store(true)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	return func() bool {
		close(quit)
		<-done
		return saw.Load()
	}
}

// RestartsMetric reads roomcell_worker_restarts_total{worker} from reg.
func RestartsMetric(t *testing.T, reg *prometheus.Registry, worker string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "roomcell_worker_restarts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "worker" && l.GetValue() == worker {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("roomcell_worker_restarts_total{worker=%s} not exported", worker)
	return 0
}

// CheckRecovered fails t unless worker restarted at least panics times
// (Health and the metric agree), was reported down while it waited
// (sawDown, from WatchDown), and is now up with nothing listed down.
func CheckRecovered(t *testing.T, sup *supervise.Supervisor, reg *prometheus.Registry, p interface{ Running() bool }, worker string, panics int, sawDown bool) {
	t.Helper()
	if n := sup.Health().Restarts(worker); n < panics {
		t.Fatalf("%s: %d restarts counted, want at least %d", worker, n, panics)
	}
	if got := RestartsMetric(t, reg, worker); int(got) != sup.Health().Restarts(worker) {
		t.Fatalf("%s: roomcell_worker_restarts_total = %v, Health says %d", worker, got, sup.Health().Restarts(worker))
	}
	if !sawDown {
		t.Fatalf("%s was never reported down while it waited for a restart", worker)
	}
	if down := sup.Health().Down(); len(down) != 0 {
		t.Fatalf("workers still reported down after recovery: %v", down)
	}
	if !p.Running() {
		t.Fatalf("%s is not running after recovery", worker)
	}
}

// NewSupervisor is a worker Supervisor "workers" of sys with a fast restart
// backoff (1 ms doubling to 20 ms) whose restarts are counted on the
// returned registry; it is stopped at the end of the test.
func NewSupervisor(t *testing.T, sys *actor.ActorSystem) (*supervise.Supervisor, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	sup, err := supervise.NewWorkerSupervisor(sys, "workers", supervise.RestartPolicy{Initial: time.Millisecond, Max: 20 * time.Millisecond},
		reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sup.Stop(5 * time.Second) })
	return sup, reg
}
