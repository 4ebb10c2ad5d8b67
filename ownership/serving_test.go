package ownership

import (
	"testing"
	"time"
)

// Serving follows the node's own lease: true while renewed, false from
// TTL - margin after the last renewal (the node cannot reach etcd: frozen
// here, as without quorum), true again once a renewal gets through, and
// a node whose lease survived keeps its shards.
func TestEtcdServingFollowsRenewals(t *testing.T) {
	tables := startTables(t, 1)
	e := tables[0]
	rooms := shardRooms()
	waitConverged(t, tables, rooms, 10*time.Second)
	if !e.Serving() {
		t.Fatal("a registered node is not serving")
	}
	owned := e.Owned()
	// Frozen past TTL - margin (1.5 s) but within the TTL (2 s): the
	// node stops serving, etcd keeps its lease.
	freeze := testTTL - testMargin/2
	start := time.Now()
	e.freeze <- freeze
	time.Sleep(testTTL - testMargin + 100*time.Millisecond - time.Since(start))
	if e.Serving() {
		t.Fatalf("still serving %v after the last renewal", time.Since(start))
	}
	// Not serving, but still granted every shard it held, under the same
	// epochs: its grains keep their state and refuse meanwhile.
	for _, id := range rooms {
		held, _ := e.Hold(id)
		granted, ok := e.Granted(id)
		if _, hold := e.Hold(id); hold || !ok || granted != held {
			t.Fatalf("%s while not serving: hold %v, granted %v at epoch %d (held at %d)", id, hold, ok, granted, held)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for !e.Serving() {
		if time.Now().After(deadline) {
			t.Fatal("not serving again after the renewals resumed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.Owned(); got != owned {
		t.Fatalf("owns %d shards after its lease survived, want the %d it had", got, owned)
	}
	for _, id := range rooms {
		if _, ok := e.Hold(id); !ok {
			t.Fatalf("does not hold %s again", id)
		}
	}
}
