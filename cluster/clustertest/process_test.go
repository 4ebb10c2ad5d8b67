//go:build !race

// Real roomcell processes: slow (seconds per start and per leave), so
// these run in `make multimember` (no -race: the processes are not built
// with it anyway, and the race pass would run them twice).

package clustertest

import (
	"context"
	"os"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "roomcell-clustertest-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// servingMembers asks n for the members it sees and returns node address
// -> rooms hosted for those serving.
func servingMembers(t *testing.T, n *Node) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for _, m := range n.Members(t).GetMembers() {
		if m.GetStatus() == cluster.StatusServing {
			out[m.GetAddress()] = m.GetRooms()
		}
	}
	return out
}

func owner(t *testing.T, via *Node, room string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := via.Admin(t).WhereIsRoom(ctx, &v1.WhereIsRoomRequest{AppCode: App, RoomId: room})
	if err != nil {
		t.Fatalf("where is %s: %v", room, err)
	}
	return r.GetOwnerAddress()
}

// Two activations of one room: its owner is frozen (SIGSTOP) with the
// room in memory until etcd drops it and the room activates on a
// survivor; then the frozen node resumes with its stale activation and
// gets commands for the room at the same time as the new owner. The log
// stays one gapless sequence with every acknowledged command once.
func TestMultiMemberProcessDuplicateActivation(t *testing.T) {
	c := New(t, Options{Nodes: 3, BinDir: binDir})
	rooms := RoomIDs(30)
	CreateRooms(t, c.Nodes, rooms, 4)
	// The frozen node is the owner of a room that node-1 (the load's
	// entry) does not own: which nodes hold shards right after start
	// depends on when each took its leases.
	var frozen *Node
	var room string
	for _, r := range rooms {
		addr := owner(t, c.Nodes[0], r)
		for _, n := range c.Nodes[1:] {
			if addr == n.ClusterAddr {
				frozen, room = n, r
			}
		}
		if frozen != nil {
			break
		}
	}
	if frozen == nil {
		t.Fatalf("node-1 owns all of %d rooms", len(rooms))
	}
	// Failover normally takes the 3s etcd lease plus a second or two (it is
	// logged below); the retry window is wide so a starved CPU (everything
	// here shares two cores) delays the test instead of failing it.
	one := &Load{Nodes: c.Nodes[:1], Rooms: []string{room}, RetryFor: 90 * time.Second}
	one.Start(t, 0)
	for i := range 5 {
		one.Send(t, 0, "before-"+string(rune('a'+i)), room)
	}

	frozen.Pause()
	paused := time.Now()
	// The first command after the freeze waits for the lease to expire,
	// then lands on a new activation.
	one.Send(t, 0, "while-frozen", room)
	moved := time.Since(paused)
	if o := owner(t, c.Nodes[0], room); o == frozen.ClusterAddr {
		t.Fatalf("room still placed on the frozen node")
	}
	t.Logf("room %s re-activated on a survivor %s after the freeze; the frozen node still holds it in memory", room, moved.Round(time.Millisecond))

	// Commands to both activations at once: through the frozen node
	// (queued in its socket) and through the survivors.
	other := c.Nodes[2]
	if frozen == other {
		other = c.Nodes[1]
	}
	both := &Load{Nodes: []*Node{frozen, c.Nodes[0], other}, Rooms: []string{room}, RetryFor: 90 * time.Second}
	both.Start(t, 4)
	time.Sleep(500 * time.Millisecond)
	frozen.Resume()
	time.Sleep(5 * time.Second)
	both.Stop()
	res := both.Result()
	if res.Failed != 0 || one.Result().Failed != 0 {
		t.Fatalf("failed for good: %s %s", both.Failures(5), one.Failures(5))
	}
	acked := one.Acked()
	for k, v := range both.Acked() {
		acked[k] = v
	}
	c.VerifyLog(t, acked)
	c.WaitOutboxPublished(t, 30*time.Second)
	fenced := frozen.LogContains("room append fenced")
	rejoined := frozen.LogContains("re-registering under a new member id")
	t.Logf("frozen node's cluster log:\n%s", frozen.LogGrep(time.Time{}, "fenced", "rejoin", "re-regist", "dropped", "lease"))
	t.Logf("after resume: %d commands acknowledged, %d retried; frozen node: %d fenced appends, %d rejoins", res.Acked, res.RetriedCommands, fenced, rejoined)
	if rejoined != 1 {
		t.Fatalf("the frozen node re-registered %d times, want once", rejoined)
	}
	// The frozen node is back as a member and serves rooms again.
	deadline := time.Now().Add(15 * time.Second)
	for len(servingMembers(t, c.Nodes[0])) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("frozen node not serving again: %v", c.Nodes[0].Members(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
	AllRoomsAnswer(t, []*Node{frozen}, rooms, 10*time.Second)
}

// checkTruth stops the test if a Truth client was told anything a single
// live copy per room would not say, or if an acknowledged command is not
// in the log exactly once; and waits for the outbox to drain.
func checkTruth(t *testing.T, label string, c *Cluster, truth *Truth) TruthResult {
	t.Helper()
	res := truth.Result()
	t.Logf("%s: %d join/read/leave cycles, %d stale reads, %d wrong rejections, %d failed", label, res.Cycles, res.StaleReads, res.WrongRejections, res.Failed)
	if res.StaleReads != 0 || res.WrongRejections != 0 || res.Failed != 0 {
		t.Fatalf("clients were told wrong things:\n%v", truth.Errors(10))
	}
	if res.Cycles == 0 {
		t.Fatal("no cycle completed")
	}
	c.VerifyLog(t, truth.Acked())
	c.WaitOutboxPublished(t, 30*time.Second)
	return res
}

// WaitEachRoomLiveOnce reads every room through every node, then waits
// until every node serves, the room activations over the members add up
// to the number of rooms (no room live on two nodes: a stale copy would
// count twice). It returns how long that took and the rooms per node.
func (c *Cluster) WaitEachRoomLiveOnce(t *testing.T, rooms []string, d time.Duration) (time.Duration, map[string]int32) {
	t.Helper()
	start := time.Now()
	AllRoomsAnswer(t, c.Nodes, rooms, d)
	for {
		hosted := servingMembers(t, c.Nodes[0])
		total := int32(0)
		for _, n := range hosted {
			total += n
		}
		if len(hosted) == len(c.Nodes) && total == int32(len(rooms)) {
			t.Logf("rooms per node %v (each of %d rooms live once)", hosted, len(rooms))
			return time.Since(start), hosted
		}
		if time.Since(start) > d {
			t.Fatalf("%d serving members hosting %d room activations for %d rooms: %v", len(hosted), total, len(rooms), hosted)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
