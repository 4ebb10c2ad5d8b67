//go:build !race

package clustertest

import (
	"cmp"
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

// span is the first and last send time, relative to t0, of the calls with
// code in [from, to).
func span(nodes []*Node, from, to time.Time, code codes.Code) (first, last time.Duration, ok bool) {
	for _, n := range nodes {
		for _, c := range n.Calls(from, to) {
			if c.Code != code {
				continue
			}
			d := c.At.Sub(from)
			if !ok || d < first {
				first = d
			}
			last = max(last, d)
			ok = true
		}
	}
	return first, last, ok
}

// Members of a three-member etcd SIGKILLed under the show's load, one at
// a time: first a follower, then the leader (a new one is elected). No
// command fails (the show asserts 0 failed for good, 0 lost, 0 doubled, 0
// stale) and no shard changes hands (every shard key keeps its create
// revision, so no room reloads). A follower's death costs nothing: every
// attempt in the 5 s after it is answered OK. The leader's costs the
// election: renewals fail until a new leader is elected, and a node whose
// lease ran to its last renewal + TTL − margin meanwhile refuses
// (Unavailable, retried by the clients); those are counted and reported.
func TestMultiMemberProcessEtcdMemberKilledUnderLoad(t *testing.T) {
	runShow(t, show{name: "etcd member SIGKILL (3 members)", etcd: 3, bound: 4 * time.Second, run: func(t *testing.T, c *Cluster, rooms []string) (time.Duration, func() string) {
		leader := c.Etcd.Leader(t)
		if leader == nil {
			t.Fatal("the etcd cluster has no leader")
		}
		rest := others(c.Etcd.Members, leader)
		keys := c.Etcd.ShardKeys(t, leader, c.BaseKey+"/")

		follower := rest[1]
		killedF := time.Now()
		follower.Kill()
		time.Sleep(5 * time.Second)
		fAll, fHung, fSlowest, fByCode := calls(c.Nodes, killedF, time.Now(), time.Second)
		if fByCode[codes.OK] != fAll {
			t.Errorf("after a follower's SIGKILL: %d attempts, by code %v; want all OK", fAll, fByCode)
		}
		for _, n := range c.Nodes {
			for _, call := range n.Calls(killedF, killedF.Add(5*time.Second)) {
				if call.Took > time.Second {
					t.Logf("after the follower's kill: %s: sent %s after it, %s, took %s", n.ID, call.At.Sub(killedF).Round(time.Millisecond), call.Code, call.Took.Round(time.Millisecond))
				}
			}
		}
		follower.Restart(t)
		c.Etcd.WaitHealthy(t, 30*time.Second)
		time.Sleep(2 * time.Second)

		killed := time.Now()
		leader.Kill()
		answered := AllRoomsAnswer(t, c.Nodes, rooms, 30*time.Second)
		time.Sleep(5 * time.Second)
		window := time.Since(killed)
		all, hung, slowest, byCode := calls(c.Nodes, killed, time.Now(), time.Second)
		first, last, refused := span(c.Nodes, killed, time.Now(), codes.Unavailable)
		after := c.Etcd.ShardKeys(t, rest[0], c.BaseKey+"/")
		if !maps.Equal(keys, after) {
			t.Errorf("shard keys changed when etcd members died: %d before, %d after", len(keys), len(after))
		}
		if hung != 0 {
			t.Errorf("%d attempts after the leader's SIGKILL took over 1 s (slowest %s)", hung, slowest)
		}
		leader.Restart(t)
		c.Etcd.WaitHealthy(t, 30*time.Second)
		return answered, func() string {
			refusals := "none refused"
			if refused {
				refusals = fmt.Sprintf("refused %.2f–%.2f s after the kill", first.Seconds(), last.Seconds())
			}
			return fmt.Sprintf("follower: %d attempts in 5 s, all OK, %d over 1 s (slowest %.2f s); leader: %d attempts in %.0f s, %d OK, %d Unavailable (%s), %d over 1 s (slowest %.2f s); %d shard keys kept",
				fAll, fHung, fSlowest.Seconds(), all, window.Seconds(), byCode[codes.OK], byCode[codes.Unavailable], refusals, hung, slowest.Seconds(), len(keys))
		}
	}})
}

// etcd loses quorum for 10 s (two of three members frozen, the leader
// running) under the show's load: every attempt sent meanwhile is
// answered within 1 s (a refusal, Unavailable, or a reply while the lease
// still ran), none hangs, and every refusal carries NO_COORDINATOR and a
// RetryInfo of one lease renewal; when quorum returns every room answers within
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
		// How much of the recovery is etcd's own election: the resumed
		// members wait out an election timeout (1–2 s) before one wins.
		elected := make(chan time.Duration, 1)
		go func() {
			for time.Since(back) < 30*time.Second {
				if c.Etcd.Leader(t) != nil {
					elected <- time.Since(back)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			elected <- -1
		}()
		answered := AllRoomsAnswer(t, c.Nodes, rooms, 30*time.Second)
		election := <-elected
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
		// Every refusal says why and when to retry: NO_COORDINATOR with
		// a RetryInfo of one lease renewal (shard_lease_ttl/4: 500 ms).
		hints := map[string]int{}
		for _, n := range c.Nodes {
			for _, call := range n.Calls(lost, back) {
				if call.Code == codes.Unavailable {
					hints[fmt.Sprintf("%s retry after %s", cmp.Or(call.Reason, "no code"), call.RetryAfter)]++
				}
			}
		}
		for hint, n := range hints {
			if hint != "NO_COORDINATOR retry after 500ms" {
				t.Errorf("%d refusals while etcd had no quorum answered %s; want NO_COORDINATOR retry after 500ms (all: %v)", n, hint, hints)
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
			return fmt.Sprintf("%d attempts during the outage: %d OK, %d Unavailable (%v), %d over 1 s (slowest %.2f s); etcd had a leader %.2f s after the resume; %d of %d shard keys changed, %d leases gone, %d rejoins",
				all, byCode[codes.OK], byCode[codes.Unavailable], hints, hung, slowest.Seconds(), election.Seconds(), changed, len(keys), len(gone), rejoins)
		}
	}})
}
