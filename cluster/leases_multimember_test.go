//go:build !race

// Several members in one process: built without -race (see
// multimember_test.go).

package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// activeSomewhere counts the room grains active on the nodes.
func activeSomewhere(ns []*node) int {
	n := 0
	for _, x := range ns {
		n += x.m.Activations(roomgrain.Kind)
	}
	return n
}

// Three members with shard leases in etcd, as roomcell runs: every room
// is active on exactly one member (the owner of its shard), and after a
// crash (no deregistration, the lease expires) every room answers again
// through a survivor within 3 s, with no acknowledged command lost; the
// crashed member's rooms are active on the survivors only.
func TestMultiMemberShardLeasesPlacementAndCrash(t *testing.T) {
	store := memdb.New()
	cfg := etcdConfig(t)
	o := memberOpts{cfg: cfg, store: store, leases: true}
	a, b, c := startNode(t, "a", o), startNode(t, "b", o), startNode(t, "c", o)
	live := []*node{a, b, c}
	defer func() {
		for _, n := range live {
			n.m.Stop(false)
		}
	}()
	waitReady(t, a, b, c)
	rooms := roomIDs(90)
	var seqs map[string]int64
	// The three tables settle (each takes its third) within a second or
	// two of the last start; commands before that retry on the owner.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	seqs = map[string]int64{}
	for _, r := range rooms {
		rep, err := a.client.Execute(ctx, create(r))
		if err != nil {
			t.Fatalf("create %s: %v", r, err)
		}
		seqs[r] = rep.GetRoomSeq()
	}
	cancel()
	waitFor(t, 10*time.Second, "every member to own its third of the shards", func() bool {
		for _, n := range live {
			if n.m.Ownership().Owner(rooms[0]) == "" {
				return false
			}
		}
		return true
	})
	touchAll(t, live, rooms, seqs, "1")
	owned := checkPlacement(t, live, rooms)
	for _, n := range live {
		if owned[n.m.Address()] == 0 {
			t.Fatalf("%s owns no room of %d: %v", n.id, len(rooms), owned)
		}
	}
	if got := activeSomewhere(live); got != len(rooms) {
		t.Fatalf("%d room grains active over the members, want %d (one each)", got, len(rooms))
	}
	t.Logf("placement over 3: %v", owned)

	c.m.Stop(false)
	live = []*node{a, b}
	crash := time.Now()
	var slowest time.Duration
	for i, r := range rooms {
		n := live[i%2]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rep, err := n.client.Execute(ctx, get(r))
		cancel()
		if err != nil {
			t.Fatalf("room %s not served %s after the crash: %v", r, time.Since(crash), err)
		}
		if rep.GetRoomSeq() != seqs[r] {
			t.Fatalf("room %s after the crash: seq %d, want %d", r, rep.GetRoomSeq(), seqs[r])
		}
		slowest = max(slowest, time.Since(crash))
	}
	t.Logf("all %d rooms answered %s after c crashed (shard lease ttl %s)", len(rooms), slowest.Round(time.Millisecond), cfg.ShardLeaseTTL)
	// Target 3 s (measured 2.4 s); 1 s of slack for a machine shared
	// with other test processes.
	if slowest > 4*time.Second {
		t.Errorf("rooms answered %s after the crash; the target is 3 s", slowest)
	}
	touchAll(t, live, rooms, seqs, "2")
	checkPlacement(t, live, rooms)
	if got := activeSomewhere(live); got != len(rooms) {
		t.Fatalf("%d room grains active over the survivors, want %d", got, len(rooms))
	}
}
