//go:build !race

package clustertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// The etcd faults of the failover table, each under the show's load
// (runShow asserts 0 lost, doubled, stale or wrongly rejected, and every
// room answering within the bound after the fault's end). On top, each
// counts what the fault cost the nodes: member re-registrations and
// ownership leases lost (their log lines), shard keys that changed owner
// or epoch, and — sampled every 250 ms from before the fault until the
// cluster settled — the rooms active over the nodes, which must never
// exceed the rooms (a room active on two nodes).

// faultLogs counts the nodes' log lines that mark a membership rejoin and
// a lost ownership lease.
func faultLogs(nodes []*Node) (rejoins, leasesLost int) {
	for _, n := range nodes {
		rejoins += n.LogContains("re-registering under a new member id")
		leasesLost += n.LogContains("ownership lease lost")
	}
	return rejoins, leasesLost
}

// reattaches counts the nodes' log lines that mark shards re-attached to
// a new liveness lease (the old one expired or was revoked; the shard
// keys, on the hold lease, stayed).
func reattaches(nodes []*Node) int {
	n := 0
	for _, node := range nodes {
		n += node.LogContains("ownership liveness re-attached")
	}
	return n
}

// sameIDRejoins counts the nodes' log lines that mark a member key put
// back under the same member id (its lease expired or was revoked; no
// other member had dropped it).
func sameIDRejoins(nodes []*Node) int {
	n := 0
	for _, node := range nodes {
		n += node.LogContains("re-registering under the same member id")
	}
	return n
}

// liveMonitor samples every node's own count of room grains (the member
// report it answers for itself) and keeps the largest sum.
type liveMonitor struct {
	stop, done chan struct{}
	mu         sync.Mutex
	max        int32
	maxAt      time.Time
	maxPer     []int32
	samples    int
}

func monitorLive(t *testing.T, nodes []*Node) *liveMonitor {
	for _, n := range nodes {
		n.Conn(t) // dialled here: the sampler must not fail the test from its goroutine
	}
	m := &liveMonitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			per, ok := ownRooms(nodes)
			if !ok {
				continue
			}
			sum := int32(0)
			for _, r := range per {
				sum += r
			}
			m.mu.Lock()
			m.samples++
			if sum > m.max {
				m.max, m.maxAt, m.maxPer = sum, time.Now(), per
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// ownRooms asks every node, at once, for the room grains active on it.
func ownRooms(nodes []*Node) ([]int32, bool) {
	per := make([]int32, len(nodes))
	ok := true
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			n.mu.Lock()
			conn := n.conn
			n.mu.Unlock()
			r, err := v1.NewClusterAdminClient(conn).Members(ctx, &v1.ClusterMembersRequest{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				ok = false
				return
			}
			for _, m := range r.GetMembers() {
				if m.GetAnsweredHere() {
					per[i] = m.GetRooms()
				}
			}
		}()
	}
	wg.Wait()
	return per, ok
}

// Stop ends the sampling and checks that no sample counted more room
// activations than rooms.
func (m *liveMonitor) Stop(t *testing.T, rooms int, from time.Time) string {
	t.Helper()
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.samples == 0 {
		t.Errorf("the room activations were never sampled")
	}
	if m.max > int32(rooms) {
		t.Errorf("%d room activations over the nodes (%v) for %d rooms, %s after the fault: a room was active on two nodes",
			m.max, m.maxPer, rooms, m.maxAt.Sub(from).Round(time.Millisecond))
	}
	return fmt.Sprintf("at most %d activations for %d rooms (%d samples)", m.max, rooms, m.samples)
}

// shard is a shard key's owner and epoch (create revision).
type shard struct {
	owner string
	epoch int64
}

// shardOwners reads the owner and epoch of every shard key.
func shardOwners(t *testing.T, c *Cluster, via *EtcdMember) map[string]shard {
	t.Helper()
	cli := etcdClient(t, via)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, c.BaseKey+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("etcd get: %v", err)
	}
	out := map[string]shard{}
	for _, kv := range r.Kvs {
		if strings.Contains(string(kv.Key), "/shards/") {
			out[string(kv.Key)] = shard{owner: string(kv.Value), epoch: kv.CreateRevision}
		}
	}
	return out
}

// moved counts the shard keys of before whose owner changed; renewed
// those that kept their owner under a new epoch (lost and retaken).
func moved(before, after map[string]shard) (movedOwner, newEpoch int) {
	for k, v := range before {
		a := after[k]
		switch {
		case a == v:
		case a.owner == v.owner:
			newEpoch++
		default:
			movedOwner++
		}
	}
	return movedOwner, newEpoch
}

// leaderAmong is the member of ms that is the etcd leader now, or nil.
func leaderAmong(t *testing.T, ms []*EtcdMember) *EtcdMember {
	return leaderOf(t, ms, 300*time.Millisecond)
}

// leaderAndRest are the etcd leader and the other members, with the
// shard keys as they are before a fault.
func leaderAndRest(t *testing.T, c *Cluster) (leader *EtcdMember, rest []*EtcdMember, owners map[string]shard) {
	leader = leaderAmong(t, c.Etcd.Members)
	if leader == nil {
		t.Fatal("the etcd cluster has no leader")
	}
	return leader, others(c.Etcd.Members, leader), shardOwners(t, c, leader)
}

// waitLeader waits until one of ms is the leader and returns when.
func waitLeader(t *testing.T, ms []*EtcdMember, d time.Duration) time.Time {
	at := waitLeaderOrZero(t, ms, d)
	if at.IsZero() {
		t.Fatalf("no etcd leader among %d members within %s", len(ms), d)
	}
	return at
}

// waitLeaderOrZero is waitLeader for a goroutine: zero if none came.
func waitLeaderOrZero(t *testing.T, ms []*EtcdMember, d time.Duration) time.Time {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if leaderAmong(t, ms) != nil {
			return time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}
}

// slowAfter lists the attempts sent in [from, to) that took over 1 s.
func slowAfter(t *testing.T, nodes []*Node, from, to time.Time) int {
	n := 0
	for _, node := range nodes {
		for _, call := range node.Calls(from, to) {
			if call.Took > time.Second {
				n++
				if n <= 10 {
					t.Logf("%s: sent %s after the window, %s, took %s", node.ID, call.At.Sub(from).Round(time.Millisecond), call.Code, call.Took.Round(time.Millisecond))
				}
			}
		}
	}
	return n
}

// The etcd leader frozen 10 s (SIGSTOP; two members keep quorum and
// elect a new leader), under load. An election changes no ownership: no
// member re-registers, no ownership lease is lost, every shard key keeps
// its owner and epoch (no room moves or reloads), no room is active on two
// nodes, and no attempt sent from one lease renewal after the new leader
// was elected until the end takes over 1 s (the ones sent during the
// election are reported).
func TestMultiMemberProcessEtcdLeaderPausedUnderLoad(t *testing.T) {
	const outage = 10 * time.Second
	runShow(t, show{name: "etcd leader SIGSTOP 10 s (3 members)", etcd: 3, bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		leader, rest, owners := leaderAndRest(t, c)
		rejoins0, lost0 := faultLogs(c.Nodes)
		reattached0, sameID0 := reattaches(c.Nodes), sameIDRejoins(c.Nodes)
		mon := monitorLive(t, c.Nodes)
		paused := time.Now()
		leader.Pause()
		elected := waitLeader(t, rest, outage)
		time.Sleep(time.Until(paused.Add(outage)))
		leader.Resume()
		answered := AllRoomsAnswer(t, c.Nodes, rooms, 30*time.Second)
		c.Etcd.WaitHealthy(t, 10*time.Second)
		time.Sleep(3 * time.Second) // a lease that were to lapse would lapse by now
		live := mon.Stop(t, len(rooms), paused)
		end := time.Now()

		rejoins1, lost1 := faultLogs(c.Nodes)
		rejoins, lost := rejoins1-rejoins0, lost1-lost0
		if rejoins != 0 || lost != 0 {
			t.Errorf("the etcd leader's pause cost %d member re-registrations and %d ownership leases; want 0 and 0", rejoins, lost)
		}
		movedOwner, newEpoch := moved(owners, shardOwners(t, c, rest[0]))
		if movedOwner != 0 || newEpoch != 0 {
			t.Errorf("%d of %d shards moved and %d were retaken under a new epoch over the leader's pause; want 0", movedOwner, len(owners), newEpoch)
		}
		settled := elected.Add(500 * time.Millisecond)
		slow := slowAfter(t, c.Nodes, settled, end)
		if slow != 0 {
			t.Errorf("%d attempts sent after the election (+ one renewal) took over 1 s", slow)
		}
		all, hung, slowest, byCode := calls(c.Nodes, paused, settled, time.Second)
		// The resumed leader may revoke leases that ran out on its clock
		// (etcd's issue 15247): what the nodes put back.
		reattached, sameID := reattaches(c.Nodes)-reattached0, sameIDRejoins(c.Nodes)-sameID0
		return answered, func() string {
			return fmt.Sprintf("new leader %.2f s after the pause; during the election %d attempts: %d OK, %d Unavailable, %d over 1 s (slowest %.2f s); after it 0 over 1 s; rooms answered %.2f s after the resume; %d rejoins, %d leases lost, %d shards moved, %d retaken (revoked by the resumed leader and put back: %d liveness re-attaches, %d member keys under the same id); %s",
				elected.Sub(paused).Seconds(), all, byCode[codes.OK], byCode[codes.Unavailable], hung, slowest.Seconds(), answered.Seconds(), rejoins, lost, movedOwner, newEpoch, reattached, sameID, live)
		}
	}})
}

// etcd loses quorum for 10 s with its leader among the frozen (the
// leader and one follower SIGSTOPped, then resumed together), under load.
// The resumed leader, still leader of its term (the member left alone
// never raised it: pre-vote), revokes every lease that ran out on its
// clock before any renewal can reach it (etcd's lessor): the nodes'
// liveness leases go, their hold leases (the shard keys) do not. Asserted:
// no ownership lease is lost, no shard key changes owner or epoch (each
// node re-attaches its shards to a new liveness lease: no room moves or
// reloads), every room answers within the show's bound after the resume,
// no member takes a new member id (every one lost its lease, so each
// re-registers under its own), and no room is ever active on two nodes.
// Re-attaches are reported.
func TestMultiMemberProcessEtcdLeaderQuorumLostUnderLoad(t *testing.T) {
	const outage = 10 * time.Second
	runShow(t, show{name: "etcd leader + follower SIGSTOP 10 s (quorum lost)", etcd: 3, bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		leader, rest, owners := leaderAndRest(t, c)
		frozen := []*EtcdMember{leader, rest[0]}
		rejoins0, lost0 := faultLogs(c.Nodes)
		reattached0 := reattaches(c.Nodes)
		mon := monitorLive(t, c.Nodes)
		paused := time.Now()
		for _, m := range frozen {
			m.Pause()
		}
		time.Sleep(outage)
		back := time.Now()
		for _, m := range frozen {
			m.Resume()
		}
		electedAt := make(chan time.Time, 1)
		go func() { electedAt <- waitLeaderOrZero(t, c.Etcd.Members, 10*time.Second) }()
		answered := AllRoomsAnswer(t, c.Nodes, rooms, 30*time.Second)
		elected := <-electedAt
		c.Etcd.WaitHealthy(t, 10*time.Second)
		time.Sleep(4 * time.Second) // the calm period ends, the nodes settle
		live := mon.Stop(t, len(rooms), paused)

		rejoins1, lost1 := faultLogs(c.Nodes)
		rejoins, lost, reattached := rejoins1-rejoins0, lost1-lost0, reattaches(c.Nodes)-reattached0
		movedOwner, newEpoch := moved(owners, shardOwners(t, c, rest[1]))
		if movedOwner != 0 || newEpoch != 0 {
			t.Errorf("%d of %d shards moved to another node and %d were retaken by their owner under a new epoch over the quorum loss; want 0 and 0", movedOwner, len(owners), newEpoch)
		}
		if lost != 0 || rejoins != 0 {
			t.Errorf("%d ownership leases lost and %d member re-registrations under a new id over the quorum loss; want 0 and 0", lost, rejoins)
		}
		all, hung, slowest, byCode := calls(c.Nodes, paused, back, time.Second)
		return answered, func() string {
			return fmt.Sprintf("during the outage %d attempts: %d OK, %d Unavailable, %d over 1 s (slowest %.2f s); leader %.2f s after the resume; every room answered %.2f s after it; %d rejoins, %d leases lost, %d liveness re-attaches, %d shards moved, %d retaken by their owner; %s",
				all, byCode[codes.OK], byCode[codes.Unavailable], hung, slowest.Seconds(), elected.Sub(back).Seconds(), answered.Seconds(), rejoins, lost, reattached, movedOwner, newEpoch, live)
		}
	}})
}

// A one-member etcd frozen 10 s (SIGSTOP), then, once the cluster
// settled, SIGKILLed and started again 10 s later, under load. Asserted
// through both: no room is ever active on two nodes (sampled), every
// room answers within the show's bound after etcd is back, and no read is
// stale (the show), and the pause costs no ownership lease and no member
// id: a frozen single member resumes as leader and revokes every lease
// that ran out (every liveness and member lease, not the hold leases of
// the shard keys), and each node re-attaches its shards and re-registers
// under its own member id; a restarted one extends every lease by its
// TTL when it becomes leader.
func TestMultiMemberProcessSingleEtcdDownUnderLoad(t *testing.T) {
	const outage = 10 * time.Second
	runShow(t, show{name: "one-member etcd SIGSTOP 10 s, then SIGKILL 10 s", etcd: 1, bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		m := c.Etcd.Members[0]
		rejoins0, lost0 := faultLogs(c.Nodes)
		mon := monitorLive(t, c.Nodes)
		paused := time.Now()
		m.Pause()
		time.Sleep(outage)
		m.Resume()
		afterPause := AllRoomsAnswer(t, c.Nodes, rooms, 30*time.Second)
		rejoins1, lost1 := faultLogs(c.Nodes)
		c.WaitEachRoomLiveOnce(t, rooms, 30*time.Second)
		time.Sleep(3 * time.Second)

		m.Kill()
		time.Sleep(outage)
		m.Restart(t)
		afterKill := AllRoomsAnswer(t, c.Nodes, rooms, 30*time.Second)
		c.Etcd.WaitHealthy(t, 10*time.Second)
		time.Sleep(3 * time.Second)
		live := mon.Stop(t, len(rooms), paused)
		rejoins2, lost2 := faultLogs(c.Nodes)
		if afterKill > 4*time.Second {
			t.Errorf("rooms answered %s after the restarted etcd; want within 4 s", afterKill)
		}
		if lost, rejoins := lost1-lost0, rejoins1-rejoins0; lost != 0 || rejoins != 0 {
			t.Errorf("the frozen etcd cost %d ownership leases and %d member re-registrations under a new id; want 0 and 0 (the nodes re-attach under their ids)", lost, rejoins)
		}
		return max(afterPause, afterKill), func() string {
			return fmt.Sprintf("after the pause: every room answered %.2f s after the resume, %d rejoins, %d leases lost; after the kill: %.2f s after the restart, %d rejoins, %d leases lost; %s",
				afterPause.Seconds(), rejoins1-rejoins0, lost1-lost0, afterKill.Seconds(), rejoins2-rejoins1, lost2-lost1, live)
		}
	}})
}
