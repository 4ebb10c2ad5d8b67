//go:build !race

package clustertest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// etcdRate is the etcd requests per second, by method, between two reads
// of the member's counters d apart.
func etcdRate(before, after map[string]float64, d time.Duration) (total float64, by map[string]float64) {
	by = map[string]float64{}
	for m, v := range after {
		if r := (v - before[m]) / d.Seconds(); r > 0 {
			by[m] = r
			total += r
		}
	}
	return total, by
}

func formatRate(by map[string]float64) string {
	keys := slices.Sorted(maps.Keys(by))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, by[k]))
	}
	return strings.Join(parts, ", ")
}

// waitServing waits until via lists want serving members and returns how
// long that took.
func waitServing(t *testing.T, via *Node, want int, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if got := len(servingMembers(t, via)); got == want {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s sees %d serving members after %s, want %d", via.ID, len(servingMembers(t, via)), d, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Ten roomcell processes, each in a network namespace of its own, on an
// etcd of the test's own (one member, so its counters are the cluster's
// etcd traffic), 300 rooms under a low load (4 writers with read-back).
// It measures the etcd requests per second in steady state (per member
// and per room), then SIGKILLs one member and partitions another for
// 15 s, and measures how long until every room answers and until the
// membership settles. Asserted: every room answers through the rest
// within 4 s of each failure; 0 commands failed, lost or doubled; 0 stale
// reads.
func TestMultiMemberProcessTenMembers(t *testing.T) {
	const nodes, nrooms = 10, 300
	ec := StartEtcdCluster(t, 1)
	startAt := time.Now()
	c := New(t, Options{Nodes: nodes, BinDir: binDir, Netns: true, EtcdCluster: ec, Edit: func(_ int, nc *NodeConfig) {
		nc.Presence = map[string]any{"stale_after": "10m"}
	}})
	t.Logf("%d nodes ready %s after the start", nodes, time.Since(startAt).Round(time.Millisecond))
	rooms := RoomIDs(nrooms)
	CreateRooms(t, c.Nodes, rooms, 8)
	load := &Load{Nodes: c.Nodes, Rooms: rooms, RetryFor: 90 * time.Second, ReadYourWrites: true}
	load.Start(t, 4)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			load.Stop()
		}
	})
	etcd := ec.Members[0]
	time.Sleep(3 * time.Second)
	const window = 10 * time.Second
	r0, a0 := etcd.Requests(t), load.Result().Acked
	time.Sleep(window)
	r1, a1 := etcd.Requests(t), load.Result().Acked
	steady, steadyBy := etcdRate(r0, r1, window)
	t.Logf("steady: %.1f etcd requests/s (%.2f per member, %.3f per room) at %.0f writes/s; by method: %s",
		steady, steady/nodes, steady/nrooms, float64(a1-a0)/window.Seconds(), formatRate(steadyBy))

	// SIGKILL one member.
	victim := c.Nodes[nodes-1]
	up := c.Nodes[:nodes-1]
	k0 := etcd.Requests(t)
	killed := time.Now()
	victim.Kill()
	killAnswered := AllRoomsAnswer(t, up, rooms, 30*time.Second)
	waitServing(t, c.Nodes[0], nodes-1, 30*time.Second)
	killSettled := time.Since(killed)
	time.Sleep(time.Until(killed.Add(window)))
	killRate, killBy := etcdRate(k0, etcd.Requests(t), time.Since(killed))
	t.Logf("SIGKILL %s: every room answered %s after, membership settled (9 serving) %s after; %.1f etcd requests/s over the %s after the kill: %s",
		victim.ID, killAnswered.Round(time.Millisecond), killSettled.Round(time.Millisecond), killRate, window, formatRate(killBy))
	if killAnswered > 4*time.Second {
		t.Errorf("rooms answered %s after the SIGKILL; want within 4 s", killAnswered)
	}

	// Partition another member for 15 s.
	const cutFor = 15 * time.Second
	cut := c.Nodes[nodes-2]
	rest := c.Nodes[:nodes-2]
	p0 := etcd.Requests(t)
	cutAt := time.Now()
	cut.Partition(t)
	cutAnswered := AllRoomsAnswer(t, rest, rooms, cutFor)
	waitServing(t, c.Nodes[0], nodes-2, cutFor)
	cutSettled := time.Since(cutAt)
	time.Sleep(time.Until(cutAt.Add(cutFor)))
	cutRate, cutBy := etcdRate(p0, etcd.Requests(t), time.Since(cutAt))
	healAt := time.Now()
	cut.Heal(t)
	h0 := etcd.Requests(t)
	healSettled := waitServing(t, c.Nodes[0], nodes-1, 60*time.Second)
	AllRoomsAnswer(t, c.Nodes[:nodes-1], rooms, 30*time.Second)
	rejoined := time.Since(healAt)
	time.Sleep(time.Until(healAt.Add(window)))
	healRate, healBy := etcdRate(h0, etcd.Requests(t), time.Since(healAt))
	t.Logf("partition %s 15 s: every room answered %s after the cut, membership settled (8 serving) %s after; %.1f etcd requests/s during the cut: %s",
		cut.ID, cutAnswered.Round(time.Millisecond), cutSettled.Round(time.Millisecond), cutRate, formatRate(cutBy))
	t.Logf("heal: 9 serving %s after the heal, every room answered through all 9 by %s after; %.1f etcd requests/s over the %s after the heal: %s",
		healSettled.Round(time.Millisecond), rejoined.Round(time.Millisecond), healRate, window, formatRate(healBy))
	if cutAnswered > 4*time.Second {
		t.Errorf("rooms answered %s after the cut; want within 4 s", cutAnswered)
	}

	load.Stop()
	stopped = true
	res := load.Result()
	if res.Failed != 0 {
		t.Errorf("%d commands or reads failed for good:\n%s", res.Failed, load.Failures(5))
	}
	if res.StaleReads != 0 {
		t.Errorf("%d stale reads:\n%s", res.StaleReads, strings.Join(load.StaleReadErrors(5), "\n"))
	}
	c.VerifyLog(t, load.Acked())
	t.Logf("load: %d acknowledged (%d needed a retry), %d reads checked, 0 lost / 0 doubled / 0 stale", res.Acked, res.RetriedCommands, res.Reads)
}
