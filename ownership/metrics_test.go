package ownership

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A node frozen past its lease TTL (both leases: the hold lease as short
// as the liveness lease here) counts one lost lease and every shard it
// held as lost with it; a second node joining takes shards over in an
// orderly handover, counted as reassigned, one per shard the first gave
// up.
func TestEtcdLeaseLossIsCounted(t *testing.T) {
	prefix := fmt.Sprintf("/roomcell-test/ownership-metrics-%d", rand.Int64())
	start := func(i int, m *Metrics) *Etcd {
		e, err := NewEtcd(EtcdConfig{Endpoints: []string{etcdEndpoint()}, Prefix: prefix, NodeID: fmt.Sprintf("n%d", i),
			Shards: testShards, TTL: testTTL, HoldTTL: testTTL, Margin: testMargin})
		if err != nil {
			t.Fatal(err)
		}
		e.SetMetrics(m)
		if err := e.Start(fmt.Sprintf("node-%d", i), nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		return e
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a := start(0, m)
	waitOwned := func(e *Etcd, n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for e.Owned() != n {
			if time.Now().After(deadline) {
				t.Fatalf("node owns %d shards, want %d", e.Owned(), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitOwned(a, testShards)
	lost := func(reason string) float64 { return testutil.ToFloat64(m.ShardsLost.WithLabelValues(reason)) }
	if testutil.ToFloat64(m.LeaseLost) != 0 || lost(ReasonLeaseLost) != 0 || lost(ReasonReassigned) != 0 {
		t.Fatal("losses counted before any happened")
	}
	a.freeze <- 2*testTTL + 500*time.Millisecond
	deadline := time.Now().Add(4*testTTL + 5*time.Second)
	for testutil.ToFloat64(m.LeaseLost) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a lease that expired under a freeze was not counted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitOwned(a, testShards)
	if got := testutil.ToFloat64(m.LeaseLost); got != 1 {
		t.Fatalf("lease lost %v times, want 1", got)
	}
	if got := lost(ReasonLeaseLost); got != testShards {
		t.Fatalf("%v shards lost with the lease, want all %d", got, testShards)
	}
	b := start(1, nil)
	deadline = time.Now().Add(10 * time.Second)
	for a.Owned()+b.Owned() != testShards || b.Owned() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no handover: a %d, b %d", a.Owned(), b.Owned())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, want := lost(ReasonReassigned), float64(testShards-a.Owned()); got != want {
		t.Fatalf("%v shards counted as reassigned, want %v (the ones a gave up)", got, want)
	}
}
