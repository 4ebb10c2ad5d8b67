package roomgrain

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The cache answers as a map with an eviction queue would: every id of
// the last recentIDs distinct ones is known, no older one is, through the
// switch from the slice to the map.
func TestRecentCommandsKeepsTheLastIDs(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var r recentCommands
		model := map[string]bool{}
		var order []string
		for i := range 3 * recentIDs {
			id := fmt.Sprint("c", rng.IntN(2*recentIDs)) // repeats too
			r.add(id)
			if !model[id] {
				if len(order) >= recentIDs {
					delete(model, order[0])
					order = order[1:]
				}
				model[id] = true
				order = append(order, id)
			}
			if i%97 == 0 || i < 3*smallRecent {
				for k := range 2 * recentIDs {
					probe := fmt.Sprint("c", k)
					if got := r.has(probe); got != model[probe] {
						t.Fatalf("seed %d after %d adds: has(%s) = %v, want %v", seed, i+1, probe, got, model[probe])
					}
				}
			}
		}
		if len(r.order) != len(order) {
			t.Fatalf("seed %d: %d ids kept, want %d", seed, len(r.order), len(order))
		}
	}
}
