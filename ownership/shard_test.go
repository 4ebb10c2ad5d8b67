package ownership

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Rooms spread within ±15% of the mean over 3 and 5 members, for member
// addresses that differ only in their last character (which put half of
// the rooms on one node of three with the library's hash) and for random
// ports, over 100k room ids.
func TestPlacementSpread(t *testing.T) {
	const rooms = 100_000
	ids := make([]string, rooms)
	for i := range ids {
		ids[i] = fmt.Sprintf("app-%d/room-%d", i%7, rand.Int64())
	}
	for _, n := range []int{3, 5} {
		for _, style := range []string{"last-char", "random-ports"} {
			nodes := make([]string, n)
			for i := range nodes {
				if style == "last-char" {
					nodes[i] = fmt.Sprintf("127.0.0.1:600%d", i+1)
				} else {
					nodes[i] = fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(40000))
				}
			}
			owners := Assign(nodes, DefaultShards)
			count := map[string]int{}
			for _, id := range ids {
				count[owners[ShardOf(id, DefaultShards)]]++
			}
			mean := float64(rooms) / float64(n)
			worst := 0.0
			for _, node := range nodes {
				dev := (float64(count[node]) - mean) / mean
				worst = max(worst, dev, -dev)
				if dev > 0.15 || dev < -0.15 {
					t.Errorf("%d members (%s): %s hosts %d rooms, %.1f%% off the mean %.0f", n, style, node, count[node], 100*dev, mean)
				}
			}
			t.Logf("%d members (%s): worst deviation from the mean %.2f%% (%v)", n, style, 100*worst, count)
		}
	}
}

// Every node computes the same assignment whatever order it lists the
// nodes in; shard counts differ by at most one; a fourth node takes about
// a quarter of the shards and nothing else moves.
func TestAssignStableAndBalanced(t *testing.T) {
	nodes := []string{"10.0.0.1:6000", "10.0.0.2:6000", "10.0.0.3:6000"}
	a := Assign(nodes, DefaultShards)
	shuffled := slices.Clone(nodes)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if b := Assign(shuffled, DefaultShards); !slices.Equal(a, b) {
		t.Fatal("assignment depends on the order of the node list")
	}
	counts := map[string]int{}
	for _, o := range a {
		counts[o]++
	}
	lo, hi := DefaultShards, 0
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if len(counts) != 3 || hi-lo > 1 {
		t.Fatalf("shard counts %v: want 3 owners within one shard of each other", counts)
	}
	grown := Assign(append(slices.Clone(nodes), "10.0.0.4:6000"), DefaultShards)
	moved, toNew := 0, 0
	for s := range a {
		if a[s] != grown[s] {
			moved++
			if grown[s] == "10.0.0.4:6000" {
				toNew++
			}
		}
	}
	// The cap makes a few shards shuffle between old nodes; most moves
	// must go to the new node.
	if toNew < DefaultShards/4-1 || moved > DefaultShards*2/5 {
		t.Fatalf("adding a fourth node moved %d shards (%d to it); want about %d, nearly all to it", moved, toNew, DefaultShards/4)
	}
	t.Logf("fourth node: %d shards moved, %d of them to it", moved, toNew)
	if Assign(nil, DefaultShards) != nil {
		t.Fatal("no nodes must assign nothing")
	}
}
