//go:build !race

package clustertest

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// calls gathers the attempts the harness's clients sent through any node
// in [from, to) and summarises them: how many, how many took longer than
// slow, the slowest, and the count per code.
func calls(nodes []*Node, from, to time.Time, slow time.Duration) (all, hung int, slowest time.Duration, byCode map[codes.Code]int) {
	byCode = map[codes.Code]int{}
	for _, n := range nodes {
		for _, c := range n.Calls(from, to) {
			all++
			byCode[c.Code]++
			slowest = max(slowest, c.Took)
			if c.Took > slow {
				hung++
			}
		}
	}
	return all, hung, slowest, byCode
}

func others(ms []*EtcdMember, not *EtcdMember) []*EtcdMember {
	var out []*EtcdMember
	for _, m := range ms {
		if m != not {
			out = append(out, m)
		}
	}
	return out
}

// One member of a three-member etcd, the leader (the harder case: a new
// one is elected), SIGKILLed under the show's load: no command fails (the
// show asserts 0 failed for good, 0 lost, 0 doubled, 0 stale) and no
// shard changes hands (every shard key keeps its create revision, so no
// room reloads). The attempts refused meanwhile are counted and reported.
func TestMultiMemberProcessEtcdMemberKilledUnderLoad(t *testing.T) {
	runShow(t, show{name: "etcd leader SIGKILL (3 members)", etcd: 3, bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		leader := c.Etcd.Leader(t)
		if leader == nil {
			t.Fatal("the etcd cluster has no leader")
		}
		rest := others(c.Etcd.Members, leader)
		keys := c.Etcd.ShardKeys(t, rest[0], c.BaseKey+"/")
		killed := time.Now()
		leader.Kill()
		answered := AllRoomsAnswer(t, c.Nodes, rooms, 30*time.Second)
		time.Sleep(5 * time.Second)
		window := time.Since(killed)
		all, hung, slowest, byCode := calls(c.Nodes, killed, time.Now(), time.Second)
		after := c.Etcd.ShardKeys(t, rest[0], c.BaseKey+"/")
		if !maps.Equal(keys, after) {
			t.Errorf("shard keys changed when one etcd member died: %d before, %d after", len(keys), len(after))
		}
		if byCode[codes.OK] != all {
			t.Logf("attempts not answered OK after the kill: %v", byCode)
		}
		leader.Restart(t)
		c.Etcd.WaitHealthy(t, 30*time.Second)
		return answered, func() string {
			return fmt.Sprintf("%d attempts in the %.0f s after the kill: %d OK, %d Unavailable, %d over 1 s (slowest %.2f s); %d shard keys kept",
				all, window.Seconds(), byCode[codes.OK], byCode[codes.Unavailable], hung, slowest.Seconds(), len(keys))
		}
	}})
}

// etcd loses quorum for 10 s (two of three members frozen, the leader
// running) under the show's load: every attempt sent meanwhile is
// answered within 1 s (a refusal, Unavailable, or a reply while the lease
// still ran), none hangs; when quorum returns every room answers within
// the show's bound, nothing is lost or doubled (the show), and the nodes,
// whose leases survived, keep their shards: every shard key keeps its
// create revision and every lease is still there.
func TestMultiMemberProcessEtcdQuorumLostUnderLoad(t *testing.T) {
	const outage = 10 * time.Second
	runShow(t, show{name: "etcd quorum lost 10 s (2 of 3 frozen)", etcd: 3, bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		leader := c.Etcd.Leader(t)
		if leader == nil {
			t.Fatal("the etcd cluster has no leader")
		}
		keys := c.Etcd.ShardKeys(t, leader, c.BaseKey+"/")
		leases := c.Etcd.Leases(t, leader)
		frozen := others(c.Etcd.Members, leader)
		for _, m := range frozen {
			m.Pause()
		}
		lost := time.Now()
		time.Sleep(outage)
		back := time.Now()
		for _, m := range frozen {
			m.Resume()
		}
		answered := AllRoomsAnswer(t, c.Nodes, rooms, 30*time.Second)
		all, hung, slowest, byCode := calls(c.Nodes, lost, back, time.Second)
		if hung != 0 {
			t.Errorf("%d of %d attempts sent while etcd had no quorum took over 1 s (slowest %s): %v", hung, all, slowest, byCode)
			for _, n := range c.Nodes {
				for _, call := range n.Calls(lost, back) {
					if call.Took > time.Second {
						t.Logf("%s: sent %s after the loss, %s, took %s", n.ID, call.At.Sub(lost).Round(time.Millisecond), call.Code, call.Took.Round(time.Millisecond))
					}
				}
			}
		}
		if byCode[codes.Unavailable] == 0 {
			t.Errorf("no attempt was refused while etcd had no quorum: %v", byCode)
		}
		for code, n := range byCode {
			if code != codes.OK && code != codes.Unavailable {
				t.Errorf("%d attempts answered %s while etcd had no quorum", n, code)
			}
		}
		c.Etcd.WaitHealthy(t, 10*time.Second)
		after := c.Etcd.ShardKeys(t, leader, c.BaseKey+"/")
		changed := 0
		for k, rev := range keys {
			if after[k] != rev {
				changed++
			}
		}
		if changed != 0 || len(after) != len(keys) {
			t.Errorf("%d of %d shard keys changed hands over the quorum loss (%d after)", changed, len(keys), len(after))
		}
		leasesAfter := c.Etcd.Leases(t, leader)
		var gone []string
		for id := range leases {
			if !leasesAfter[id] {
				gone = append(gone, fmt.Sprintf("%x", int64(id)))
			}
		}
		slices.Sort(gone)
		if len(gone) != 0 {
			t.Errorf("leases gone after the quorum loss: %v", gone)
		}
		rejoins := 0
		for _, n := range c.Nodes {
			rejoins += n.LogContains("re-registering under a new member id")
		}
		return answered, func() string {
			return fmt.Sprintf("%d attempts during the outage: %d OK, %d Unavailable, %d over 1 s (slowest %.2f s); %d of %d shard keys changed, %d leases gone, %d rejoins",
				all, byCode[codes.OK], byCode[codes.Unavailable], hung, slowest.Seconds(), changed, len(keys), len(gone), rejoins)
		}
	}})
}
