package ownership

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testTTL    = 2 * time.Second
	testMargin = 500 * time.Millisecond
	testShards = 64
)

func etcdEndpoint() string {
	if ep := os.Getenv("ROOMCELL_TEST_ETCD"); ep != "" {
		return ep
	}
	return "127.0.0.1:23790"
}

// startTables starts n tables (nodes "node-0".."node-n-1") on a fresh
// prefix of the test etcd.
func startTables(t *testing.T, n int) []*Etcd {
	t.Helper()
	selves := make([]string, n)
	for i := range selves {
		selves[i] = fmt.Sprintf("node-%d", i)
	}
	return startTablesAt(t, selves)
}

// startTablesAt starts one table per node address in selves.
func startTablesAt(t *testing.T, selves []string) []*Etcd {
	t.Helper()
	prefix := fmt.Sprintf("/roomcell-test/ownership-%d", rand.Int64())
	tables := make([]*Etcd, len(selves))
	for i := range tables {
		e, err := NewEtcd(EtcdConfig{Endpoints: []string{etcdEndpoint()}, Prefix: prefix, NodeID: fmt.Sprintf("n%d", i),
			Shards: testShards, TTL: testTTL, Margin: testMargin})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(selves[i], nil); err != nil {
			t.Fatalf("start table %d: %v", i, err)
		}
		tables[i] = e
		t.Cleanup(e.Close)
	}
	return tables
}

// shardRooms returns one room identity per shard.
func shardRooms() []string {
	out := make([]string, testShards)
	left := testShards
	for i := 0; left > 0; i++ {
		id := fmt.Sprintf("app/room-%d", i)
		if s := ShardOf(id, testShards); out[s] == "" {
			out[s] = id
			left--
		}
	}
	return out
}

// holders counts, per room, the tables that hold it now, and returns the
// epochs the holders hold it under.
func holders(tables []*Etcd, rooms []string) (count []int, epoch []int64) {
	count, epoch = make([]int, len(rooms)), make([]int64, len(rooms))
	for r, id := range rooms {
		for _, e := range tables {
			if ep, ok := e.Hold(id); ok {
				count[r]++
				epoch[r] = ep
			}
		}
	}
	return count, epoch
}

// watchdog checks every 2 ms that no room is held by two tables at once,
// until stop; it reports the violations.
func watchdog(tables []*Etcd, rooms []string) (stop func() int64) {
	var doubles atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			count, _ := holders(tables, rooms)
			for _, c := range count {
				if c > 1 {
					doubles.Add(1)
				}
			}
		}
	}()
	return func() int64 { close(done); wg.Wait(); return doubles.Load() }
}

// waitAllHeld waits until every room is held by exactly one of tables and
// returns how long that took.
func waitAllHeld(t *testing.T, tables []*Etcd, rooms []string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		count, _ := holders(tables, rooms)
		all := true
		for _, c := range count {
			all = all && c == 1
		}
		if all {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("rooms not all held by exactly one node after %v: %v", within, count)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitConverged waits until every room is held by the table that the
// assignment over all of tables names: the start-up handovers are over.
func waitConverged(t *testing.T, tables []*Etcd, rooms []string, within time.Duration) {
	t.Helper()
	nodes := make([]string, len(tables))
	for i, e := range tables {
		nodes[i] = e.self
	}
	want := Assign(nodes, testShards)
	deadline := time.Now().Add(within)
	for {
		ok := true
		for _, id := range rooms {
			for _, e := range tables {
				_, held := e.Hold(id)
				ok = ok && held == (want[ShardOf(id, testShards)] == e.self)
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tables did not converge on the assignment within %v", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Three nodes split the shards evenly; one is killed (stops renewing, as
// after SIGKILL): its shards are held again within TTL + 1 s, under higher
// epochs, and no room is ever held by two nodes.
func TestEtcdKilledNodeShardsTakenOver(t *testing.T) {
	tables := startTables(t, 3)
	rooms := shardRooms()
	waitConverged(t, tables, rooms, 10*time.Second)
	for i, e := range tables {
		if n := e.Owned(); n < testShards/3-1 || n > testShards/3+2 {
			t.Errorf("node %d owns %d of %d shards; want about a third", i, n, testShards)
		}
	}
	stop := watchdog(tables, rooms)
	_, before := holders(tables, rooms)
	victim := tables[0]
	var victimRooms []int
	for r, id := range rooms {
		if _, ok := victim.Hold(id); ok {
			victimRooms = append(victimRooms, r)
		}
	}
	victim.Kill()
	took := waitAllHeld(t, tables[1:], rooms, testTTL+3*time.Second)
	if doubles := stop(); doubles != 0 {
		t.Fatalf("%d observations of a room held by two nodes", doubles)
	}
	if took > testTTL+time.Second {
		t.Errorf("shards of the killed node held again after %v; want within TTL+1s (%v)", took, testTTL+time.Second)
	}
	_, after := holders(tables[1:], rooms)
	for _, r := range victimRooms {
		if after[r] <= before[r] {
			t.Errorf("room %s: epoch %d after the takeover, %d before; want it higher", rooms[r], after[r], before[r])
		}
	}
	t.Logf("killed node's %d shards held again after %v", len(victimRooms), took.Round(time.Millisecond))
}

// A node frozen longer than its lease (SIGSTOP, GC, VM pause) stops
// serving at TTL - margin; the others take its shards; when it resumes it
// re-registers under a new lease and gets its share back under higher
// epochs. The healthy nodes keep the shards that stay theirs (a rejoin
// does not make them drop everything), and no room is ever held twice.
func TestEtcdFrozenNodeComesBack(t *testing.T) {
	tables := startTables(t, 3)
	rooms := shardRooms()
	waitConverged(t, tables, rooms, 10*time.Second)
	stop := watchdog(tables, rooms)
	_, before := holders(tables, rooms)
	frozen := tables[0]
	kept := map[int]int{} // room -> healthy holder before the freeze
	for r, id := range rooms {
		for i, e := range tables[1:] {
			if _, ok := e.Hold(id); ok {
				kept[r] = i + 1
			}
		}
	}
	freeze := 2*testTTL + 500*time.Millisecond
	start := time.Now()
	frozen.freeze <- freeze
	// While frozen: the node stops answering at TTL - margin at the latest.
	time.Sleep(testTTL - testMargin + 100*time.Millisecond)
	for _, id := range rooms {
		if _, ok := frozen.Hold(id); ok {
			t.Fatalf("frozen node still holds %s %v after its renewals stopped", id, time.Since(start))
		}
	}
	waitAllHeld(t, tables[1:], rooms, testTTL+3*time.Second)
	// After the thaw it rejoins and takes its share again.
	time.Sleep(time.Until(start.Add(freeze)))
	thaw := time.Now()
	deadline := thaw.Add(10 * time.Second)
	for frozen.Owned() < testShards/3-1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(thaw)
	waitConverged(t, tables, rooms, 5*time.Second)
	if doubles := stop(); doubles != 0 {
		t.Fatalf("%d observations of a room held by two nodes", doubles)
	}
	if n := frozen.Owned(); n < testShards/3-1 {
		t.Fatalf("resumed node owns %d shards; want its share back (about %d)", n, testShards/3)
	}
	_, after := holders(tables, rooms)
	moved := 0
	for r, id := range rooms {
		if _, ok := frozen.Hold(id); ok && after[r] <= before[r] {
			t.Errorf("room %s back on the resumed node under epoch %d, not above its old %d", id, after[r], before[r])
		}
		if h, ok := kept[r]; ok {
			if _, still := tables[h].Hold(id); !still {
				moved++
			}
		}
	}
	if moved != 0 {
		t.Errorf("%d rooms of healthy nodes changed owner across the freeze; want 0", moved)
	}
	t.Logf("resumed node held its share again %v after the thaw", took.Round(time.Millisecond))
}
