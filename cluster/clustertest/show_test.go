//go:build !race

package clustertest

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The failures of the "Show" table, each under the same load:
// three roomcell processes, 300 rooms, writers (Load: a JoinRoom, then a
// read of it through a random node: read-your-writes) and Truth clients
// (join, read, leave) entering through every node. Each run asserts and
// reports, as one table row (docs/cluster.md; make chaos collects the rows
// of three repeats into $ROOMCELL_CHAOS_TABLE):
//   - lost / doubled: VerifyLog over every acknowledged command;
//   - stale reads: a read older than the reader's own acknowledged write
//     (Load and Truth), and wrong rejections (Truth's leave after its
//     acknowledged join answered "not a member");
//   - live on two nodes: after the failure, every room read through every
//     node, the activations over the members must add up to the rooms;
//   - how long until every room answered again through the nodes that
//     were up (bounded below);
//   - placement: rooms per node at the end.

// show is one failure: it does it to the running cluster and returns how
// long it took (from the failure) until every room answered through the
// nodes that were up, and a note for the table (called once the cluster
// has recovered).
type show struct {
	name  string
	netns bool
	// etcd, when positive, runs the nodes on an etcd cluster of the
	// test's own with that many members (c.Etcd) instead of the shared
	// one.
	etcd int
	// bound is the most "every room answers" may take: the issue's
	// target plus 1 s of slack for a machine shared with other builds.
	bound time.Duration
	run   func(t *testing.T, c *Cluster, rooms []string) (answered time.Duration, note func() string)
}

// showWriters is the number of Load writers (ROOMCELL_CHAOS_WRITERS,
// default 16; each write is followed by a read) next to 12 Truth clients.
func showWriters(t *testing.T) int {
	if v := os.Getenv("ROOMCELL_CHAOS_WRITERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ROOMCELL_CHAOS_WRITERS=%q: want a positive number", v)
		}
		return n
	}
	return 16
}

func runShow(t *testing.T, s show) {
	// Presence would take the load's users (who never heartbeat) out of
	// their rooms after 60 s; a Truth leave retried past that would be
	// counted as a wrong rejection although a single copy gave it.
	var ec *EtcdCluster
	if s.etcd > 0 {
		ec = StartEtcdCluster(t, s.etcd)
	}
	c := New(t, Options{Nodes: 3, BinDir: binDir, Netns: s.netns, EtcdCluster: ec, Edit: func(_ int, nc *NodeConfig) {
		nc.Presence = map[string]any{"stale_after": "10m"}
	}})
	rooms := RoomIDs(300)
	CreateRooms(t, c.Nodes, rooms, 8)
	// Wide retry windows: a command in flight through a frozen or cut-off
	// node waits for the failure to end; what matters is that it lands
	// once and that nobody is told anything wrong.
	load := &Load{Nodes: c.Nodes, Rooms: rooms, RetryFor: 90 * time.Second, ReadYourWrites: true}
	truth := &Truth{Nodes: c.Nodes, Rooms: rooms, RetryFor: 90 * time.Second}
	load.Start(t, showWriters(t))
	truth.Start(t, 12)
	stopped := false
	t.Cleanup(func() { // a failed run stops its clients before its nodes
		if !stopped {
			load.Stop()
			truth.Stop()
		}
	})
	start := time.Now()
	// The steady rate, measured before the failure.
	done := func() (writes, reads int64) {
		l, tr := load.Result(), truth.Result()
		return l.Acked + 2*tr.Cycles, l.Reads + tr.Cycles
	}
	time.Sleep(time.Second)
	w0, r0 := done()
	time.Sleep(3 * time.Second)
	w1, r1 := done()
	steadyW, steadyR := float64(w1-w0)/3, float64(r1-r0)/3

	answered, note := s.run(t, c, rooms)
	t.Logf("%s: every room answered %s after the failure", s.name, answered.Round(time.Millisecond))
	if answered > s.bound {
		t.Errorf("%s: rooms answered %s after the failure; want within %s", s.name, answered, s.bound)
	}
	time.Sleep(5 * time.Second) // load on the recovered cluster
	load.Stop()
	truth.Stop()
	stopped = true
	elapsed := time.Since(start)

	lres := load.Result()
	if lres.Failed != 0 {
		t.Errorf("%d commands or reads failed for good:\n%s", lres.Failed, load.Failures(5))
	}
	if lres.StaleReads != 0 {
		t.Errorf("%d read-your-writes reads were stale:\n%s", lres.StaleReads, strings.Join(load.StaleReadErrors(10), "\n"))
	}
	t.Logf("%s: writers' commands: %d acknowledged, %d needed a retry (%d retried attempts, %d of them answered 'retry' by a live node, the rest could not reach one; %d answered as duplicates)",
		s.name, lres.Acked, lres.RetriedCommands, lres.RetriedAttempts, lres.ServerRetries, lres.Duplicates)
	tres := checkTruth(t, s.name, c, truth)
	c.VerifyLog(t, load.Acked())
	_, hosted := c.WaitEachRoomLiveOnce(t, rooms, 30*time.Second)

	writes := float64(lres.Acked+2*tres.Cycles) / elapsed.Seconds()
	reads := float64(lres.Reads+tres.Cycles) / elapsed.Seconds()
	row := fmt.Sprintf("| %s | %.0f writes/s + %.0f reads/s before, %.0f + %.0f over the run | %d acks: 0 / 0 | %d / %d (%d reads checked) | 0 | %.2f s | %s | %s |",
		s.name, steadyW, steadyR, writes, reads, lres.Acked+2*tres.Cycles, lres.StaleReads+tres.StaleReads, tres.WrongRejections,
		lres.Reads+tres.Cycles, answered.Seconds(), spread(hosted), note())
	gates := 0
	for _, n := range c.Nodes {
		gates += n.LogContains("room store unreachable")
	}
	t.Logf("store gate closed %d time(s) on the nodes during the run", gates)
	t.Log("row: " + row)
	if f := os.Getenv("ROOMCELL_CHAOS_TABLE"); f != "" && !t.Failed() {
		appendLine(t, f, row)
	}
}

// spread formats rooms per node and the largest deviation from the mean.
func spread(hosted map[string]int32) string {
	var counts []int
	total := 0
	for _, n := range hosted {
		counts = append(counts, int(n))
		total += int(n)
	}
	slices.Sort(counts)
	mean := float64(total) / float64(len(counts))
	dev := 0.0
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = strconv.Itoa(n)
		dev = math.Max(dev, math.Abs(float64(n)-mean)/mean)
	}
	return fmt.Sprintf("%s (±%.0f%%)", strings.Join(parts, "/"), 100*dev)
}

func appendLine(t *testing.T, path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

// SIGKILL one node; once every room answers through the others, start it
// again (same node id) so the end state has three members. A room of the
// victim's is liked through the kill: its total is the likes sent, each
// counted once.
func TestMultiMemberProcessKillUnderLoad(t *testing.T) {
	runShow(t, show{name: "SIGKILL", bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		victim := c.Nodes[2]
		// A room of the victim's liked through the kill (likes_test.go).
		likes := startLikers(t, c.Nodes[0], victim)
		time.Sleep(time.Second)
		killed := time.Now()
		likes.killedAt.Store(killed.UnixNano())
		victim.Kill()
		answered := AllRoomsAnswer(t, c.Nodes[:2], rooms, 30*time.Second)
		killedAt := time.Since(killed)
		time.Sleep(time.Second) // likes on the room's new activation
		likes.check(t)
		after := servingMembers(t, c.Nodes[0])
		if len(after) != 2 || after[victim.ClusterAddr] != 0 {
			t.Fatalf("after the kill node-1 sees %v", after)
		}
		victim.Start(t)
		ready := victim.WaitReady(t, 60*time.Second)
		return answered, func() string {
			return fmt.Sprintf("restarted, ready %.1f s after start (%.1f s after the kill)", ready.Seconds(), (killedAt + ready).Seconds())
		}
	}})
}

// SIGSTOP one node for chaosPause (15 s; 30 s in make chaos' second
// pass, past the 20 s gossip expiry), then SIGCONT.
func TestMultiMemberProcessPauseUnderLoad(t *testing.T) {
	pause := chaosPause(t)
	runShow(t, show{name: "SIGSTOP " + pause.String(), bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		frozen := c.Nodes[1]
		frozen.Pause()
		paused := time.Now()
		answered := AllRoomsAnswer(t, []*Node{c.Nodes[0], c.Nodes[2]}, rooms, pause)
		time.Sleep(time.Until(paused.Add(pause)))
		frozen.Resume()
		return answered, func() string {
			return fmt.Sprintf("%d rejoin(s) after SIGCONT", frozen.LogContains("re-registering under a new member id"))
		}
	}})
}

// Cut one node off (network namespaces, nft) for 15 s, then heal.
func TestMultiMemberProcessPartitionUnderLoad(t *testing.T) {
	const cutFor = 15 * time.Second
	runShow(t, show{name: "partition 15s", netns: true, bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		victim := c.Nodes[1]
		_, refused0 := victim.Answers(time.Time{}, time.Now())
		victim.Partition(t)
		cutAt := time.Now()
		answered := AllRoomsAnswer(t, []*Node{c.Nodes[0], c.Nodes[2]}, rooms, cutFor)
		time.Sleep(time.Until(cutAt.Add(cutFor)))
		healAt := time.Now()
		victim.Heal(t)
		// Clients still reach the cut-off node. Its last renewal left
		// before the cut, so it holds nothing after cut + TTL − margin
		// (1.5 s); a reply that reached a client after cut + TTL + 1 s
		// came from a copy answering without its lease.
		leaseGone := cutAt.Add(3 * time.Second)
		early, _ := victim.Answers(cutAt, leaseGone)
		late, refused := victim.Answers(leaseGone, healAt)
		if late != 0 {
			t.Errorf("the cut-off node answered %d requests between %s after the cut and the heal", late, leaseGone.Sub(cutAt))
		}
		return answered, func() string {
			t.Logf("cut-off node's cluster log:\n%s", victim.LogGrep(cutAt, "fenced", "rejoin", "re-regist", "lease lost", "lease granted"))
			return fmt.Sprintf("cut-off node: %d replies in the first 3 s, %d after, %d refusals (retryable); %d rejoin(s), %d fenced appends",
				early, late, refused-refused0, victim.LogContains("re-registering under a new member id"), victim.LogContains("room append fenced"))
		}
	}})
}

// SIGTERM each node in turn, start it again, wait for /readyz, next. The
// time is the longest, over the three restarts, from SIGTERM until every
// room answered through the two other nodes.
func TestMultiMemberProcessRollingRestart(t *testing.T) {
	runShow(t, show{name: "rolling SIGTERM restart", bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		var worst, worstExit, worstReady time.Duration
		for i, n := range c.Nodes {
			others := slices.Delete(slices.Clone(c.Nodes), i, i+1)
			done := make(chan struct{})
			var took time.Duration
			var err error
			go func() { took, err = n.Term(60 * time.Second); close(done) }()
			answered := AllRoomsAnswer(t, others, rooms, 30*time.Second)
			<-done
			if err != nil {
				t.Fatalf("%s: %v", n.ID, err)
			}
			if n.LogContains("cluster member drained") != 1 {
				t.Errorf("%s did not log a completed drain", n.ID)
			}
			n.Start(t)
			ready := n.WaitReady(t, 60*time.Second)
			t.Logf("%s: every room answered through the others %s after SIGTERM; exit %s, start to ready %s",
				n.ID, answered.Round(time.Millisecond), took.Round(time.Millisecond), ready.Round(time.Millisecond))
			worst, worstExit, worstReady = max(worst, answered), max(worstExit, took), max(worstReady, ready)
			time.Sleep(2 * time.Second)
		}
		return worst, func() string {
			return fmt.Sprintf("SIGTERM to exit ≤ %.1f s, start to ready ≤ %.1f s", worstExit.Seconds(), worstReady.Seconds())
		}
	}})
}
