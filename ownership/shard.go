package ownership

import (
	"hash/fnv"
	"slices"
	"strconv"
)

// DefaultShards is the number of virtual shards. Fixed for the life of a
// cluster: changing it moves every room. 1024 spreads rooms evenly over
// tens of nodes and keeps a node's share of etcd keys small.
const DefaultShards = 1024

// mix is splitmix64's finaliser: FNV-1a alone barely moves the high bits
// for inputs that differ in their last byte (addresses ending :6001,
// :6002), which is what skewed the library's placement.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func hash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return mix(h.Sum64())
}

// ShardOf is the shard of a room identity ("<app_code>/<room_id>"). Every
// node computes the same.
func ShardOf(identity string, shards int) int {
	return int(hash(identity) % uint64(shards))
}

// Assign gives every shard an owner among nodes (addresses): rendezvous
// hashing with a cap per node, so the counts differ by at most one and a node joining or leaving moves about
// 1/len(nodes) of the shards. Every node computes the same assignment
// from the same set, in any order. Nil when nodes is empty.
func Assign(nodes []string, shards int) []string {
	if len(nodes) == 0 {
		return nil
	}
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	seeds := make([]uint64, len(nodes))
	for i, n := range nodes {
		seeds[i] = hash(n)
	}
	// floor shards each, and one more for the first shards%len(nodes)
	// nodes that reach floor: counts differ by at most one.
	floor, extra := shards/len(nodes), shards%len(nodes)
	count := make([]int, len(nodes))
	out := make([]string, shards)
	order := make([]int, len(nodes))
	scores := make([]uint64, len(nodes))
	for s := range shards {
		key := hash(strconv.Itoa(s))
		for i := range nodes {
			order[i] = i
			scores[i] = mix(seeds[i] ^ key)
		}
		slices.SortFunc(order, func(a, b int) int {
			switch {
			case scores[a] > scores[b]:
				return -1
			case scores[a] < scores[b]:
				return 1
			}
			return 0
		})
		for _, i := range order {
			if count[i] < floor || count[i] == floor && extra > 0 {
				if count[i] == floor {
					extra--
				}
				count[i]++
				out[s] = nodes[i]
				break
			}
		}
	}
	return out
}
