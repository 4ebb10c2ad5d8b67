//go:build !race

// Several members in one process trip a data race inside Proto.Actor
// itself (remote.Start sets the process-global grpclog while the first
// member's gRPC goroutines read it; a known Proto.Actor race), so this file is
// built only without -race; `make test` runs it in its own pass.

package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence/memdb"
)

func roomIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("app/room-%03d", i)
	}
	return ids
}

// waitFor polls cond every 50ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// agreed reports whether every node lists exactly the given addresses.
func agreed(ns []*node) bool {
	want := addresses(ns)
	for _, n := range ns {
		var got []string
		for _, m := range n.m.Members() {
			got = append(got, m.Address())
		}
		if !slices.Equal(got, want) {
			return false
		}
	}
	return true
}

func addresses(ns []*node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.m.Address())
	}
	slices.Sort(out)
	return out
}

// checkPlacement asserts that every node computes the same owner for
// every room, that every owner is a live node, and that each node's active
// room count is what it owns after a command to every roomgrain.
func checkPlacement(t *testing.T, ns []*node, rooms []string) map[string]int {
	t.Helper()
	owned := map[string]int{}
	for _, r := range rooms {
		owner := ns[0].m.Owner(roomgrain.Kind, r)
		for _, n := range ns[1:] {
			if got := n.m.Owner(roomgrain.Kind, r); got != owner {
				t.Fatalf("room %s: %s places it on %s, %s on %s", r, ns[0].id, owner, n.id, got)
			}
		}
		owned[owner]++
	}
	for _, n := range ns {
		if got := n.m.Activations(roomgrain.Kind); got != owned[n.m.Address()] {
			t.Errorf("%s hosts %d rooms, owns %d", n.id, got, owned[n.m.Address()])
		}
	}
	return owned
}

// touchAll sends one JoinRoom per room through rotating nodes and checks
// the room's seq moved by exactly one; it returns the new seq per roomgrain.
func touchAll(t *testing.T, ns []*node, rooms []string, seqs map[string]int64, round string) {
	t.Helper()
	for i, r := range rooms {
		n := ns[i%len(ns)]
		rep := exec(t, n, join(r, "u-"+round, "join-"+round))
		if rep.GetDuplicate() || rep.GetRoomSeq() != seqs[r]+1 {
			t.Fatalf("room %s round %s through %s: seq %d duplicate %v, want seq %d", r, round, n.id, rep.GetRoomSeq(), rep.GetDuplicate(), seqs[r]+1)
		}
		seqs[r] = rep.GetRoomSeq()
	}
}

func createAll(t *testing.T, n *node, rooms []string) map[string]int64 {
	seqs := map[string]int64{}
	for _, r := range rooms {
		seqs[r] = exec(t, n, create(r)).GetRoomSeq()
	}
	return seqs
}

// Three etcd members: rooms spread over all, every member places every
// room the same way; a graceful leave moves the leaver's rooms; a crashed
// member's rooms come back after its lease expires; a restarted node
// (same node id) takes rooms again.
func TestMultiMemberEtcdPlacementLeaveCrashRejoin(t *testing.T) {
	store := memdb.New()
	cfg := etcdConfig(t)
	o := memberOpts{cfg: cfg, store: store}
	a, b, c := startNode(t, "a", o), startNode(t, "b", o), startNode(t, "c", o)
	live := []*node{a, b, c}
	defer func() {
		for _, n := range live {
			n.m.Stop(false)
		}
	}()
	waitReady(t, a, b, c)
	if !agreed(live) {
		t.Fatal("members ready but views differ")
	}
	rooms := roomIDs(60)
	seqs := createAll(t, a, rooms)
	owned := checkPlacement(t, live, rooms)
	for _, n := range live {
		if owned[n.m.Address()] == 0 {
			t.Fatalf("%s owns no room of %d: %v", n.id, len(rooms), owned)
		}
	}
	t.Logf("placement over 3: %v", owned)
	touchAll(t, live, rooms, seqs, "1")

	// ClusterAdmin's view: every member answers, all serving, same view.
	for _, r := range a.m.Survey(context.Background(), roomgrain.Kind, rooms[0]) {
		if r.Err != nil || r.Report.GetStatus() != cluster.StatusServing || len(r.Report.GetMemberAddresses()) != 3 ||
			r.Report.GetOwnerAddress() != a.m.Owner(roomgrain.Kind, rooms[0]) {
			t.Fatalf("survey entry %+v", r)
		}
	}

	// Graceful leave of b.
	bRooms := b.m.Activations(roomgrain.Kind)
	start := time.Now()
	b.m.Stop(true)
	t.Logf("b drained %d rooms and left in %s", bRooms, time.Since(start).Round(time.Millisecond))
	live = []*node{a, c}
	if !agreed(live) {
		t.Fatalf("after b left, views differ")
	}
	touchAll(t, live, rooms, seqs, "2")
	checkPlacement(t, live, rooms)

	// Crash of c: no deregistration; its lease expires.
	c.m.Stop(false)
	live = []*node{a}
	crash := time.Now()
	for _, r := range rooms {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		for {
			rep, err := a.client.Execute(ctx, get(r))
			if err == nil {
				if rep.GetRoomSeq() != seqs[r] {
					t.Fatalf("room %s after crash: seq %d, want %d", r, rep.GetRoomSeq(), seqs[r])
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("room %s not served %s after the crash: %v", r, time.Since(crash), err)
			}
		}
		cancel()
	}
	t.Logf("all rooms answered %s after c crashed (lease ttl %s)", time.Since(crash).Round(time.Millisecond), cfg.EtcdLeaseTTL)

	// b comes back under the same node id and takes rooms again.
	b2 := startNode(t, "b", o)
	live = []*node{a, b2}
	waitReady(t, b2)
	waitFor(t, 5*time.Second, "a to see b again", func() bool { return agreed(live) })
	touchAll(t, live, rooms, seqs, "3")
	owned = checkPlacement(t, live, rooms)
	if owned[b2.m.Address()] == 0 {
		t.Fatalf("restarted b owns no room: %v", owned)
	}
}

// A member whose etcd lease is revoked behind its back while it renews
// (what an etcd leader that resumes after its own pause does: it revokes
// every lease that ran out on its clock, though the new leader kept them
// renewed) puts its key back under the same member id before the other
// member drops it: a's view never lacks b (sampled every 20 ms), no
// rejoin is counted, and every room answers with its history. Then a
// drops b for good (blocked by hand, as a member whose key stayed gone
// past the removal delay is: a paused process, a partition, the
// library's #1133): b sees itself on a's block list, re-registers under
// a new id, stops its stale rooms and serves again; a admits it.
func TestMultiMemberEtcdLeaseLossRejoins(t *testing.T) {
	store := memdb.New()
	cfg := etcdConfig(t)
	o := memberOpts{cfg: cfg, store: store}
	a, b := startNode(t, "a", o), startNode(t, "b", o)
	defer a.m.Stop(false)
	defer b.m.Stop(false)
	waitReady(t, a, b)
	rooms := roomIDs(20)
	seqs := createAll(t, a, rooms)
	if b.m.Activations(roomgrain.Kind) == 0 {
		t.Fatal("b hosts no room")
	}
	oldID := b.m.MemberID()

	// Take b's registration away behind its back.
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.EtcdEndpoints, DialTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	key := cfg.EtcdBaseKey + "/" + cfg.Name + "/" + oldID
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("b's key %s: %v %v", key, resp, err)
	}
	oldLease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := cli.Revoke(ctx, oldLease); err != nil {
		t.Fatal(err)
	}
	cancel()
	revoked := time.Now()
	dropped := 0
	for time.Since(revoked) < cfg.EtcdLeaseTTL+time.Second {
		if !agreed([]*node{a, b}) {
			dropped++
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dropped != 0 {
		t.Errorf("%d samples in which a member's view lacked the other; want 0", dropped)
	}
	if got := b.m.MemberID(); got != oldID {
		t.Fatalf("b runs as %q after its lease was revoked under it, was %q; want the same id", got, oldID)
	}
	if v := metricValue(t, b, "roomcell_cluster_rejoins_total"); v != 0 {
		t.Fatalf("rejoins counter = %v after a revocation b caught at once; want 0", v)
	}
	gctx, gcancel := context.WithTimeout(context.Background(), 3*time.Second)
	resp, err = cli.Get(gctx, key)
	gcancel()
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) == oldLease {
		t.Fatalf("b's key after the revocation: %v %v; want it back under a new lease", resp, err)
	}
	touchAll(t, []*node{a, b}, rooms, seqs, "revoked")

	a.m.Cluster.Remote.BlockList().Block(oldID)
	took := waitFor(t, 10*time.Second, "b to rejoin under a new id", func() bool {
		return b.m.MemberID() != oldID && b.m.Status() == cluster.StatusServing && agreed([]*node{a, b})
	})
	t.Logf("b rejoined as %s in %s", b.m.MemberID(), took.Round(time.Millisecond))
	if want := oldID + "~1"; b.m.MemberID() != want {
		t.Fatalf("member id %q, want %q", b.m.MemberID(), want)
	}
	if v := metricValue(t, b, "roomcell_cluster_rejoins_total"); v != 1 {
		t.Fatalf("rejoins counter = %v", v)
	}
	touchAll(t, []*node{a, b}, rooms, seqs, "after")
	owned := checkPlacement(t, []*node{a, b}, rooms)
	if owned[b.m.Address()] == 0 {
		t.Fatalf("rejoined b owns no room: %v", owned)
	}
}

// 10 leave/rejoin cycles of one node id (graceful and crash alternating)
// leave every member serving, views agreed and every room answering with
// its full history.
func TestMultiMemberEtcdLeaveRejoinSoak(t *testing.T) {
	store := memdb.New()
	cfg := etcdConfig(t)
	o := memberOpts{cfg: cfg, store: store}
	a, b, c := startNode(t, "a", o), startNode(t, "b", o), startNode(t, "c", o)
	live := []*node{a, b, c}
	defer func() {
		for _, n := range live {
			n.m.Stop(false)
		}
	}()
	waitReady(t, a, b, c)
	rooms := roomIDs(30)
	seqs := createAll(t, a, rooms)
	for cycle := range 10 {
		graceful := cycle%2 == 0
		victim := live[cycle%3]
		victim.m.Stop(graceful)
		rest := slices.DeleteFunc(slices.Clone(live), func(n *node) bool { return n == victim })
		if !graceful {
			waitFor(t, 10*time.Second, "the crashed member to expire", func() bool { return agreed(rest) })
		}
		back := startNode(t, victim.id, o)
		live = append(rest, back)
		waitReady(t, back)
		waitFor(t, 10*time.Second, "views to agree", func() bool { return agreed(live) })
		touchAll(t, live, rooms, seqs, fmt.Sprint(cycle))
		for _, n := range live {
			if n.m.Status() != cluster.StatusServing {
				t.Fatalf("cycle %d: %s is %s", cycle, n.id, n.m.Status())
			}
		}
		t.Logf("cycle %d (%s %s): %v", cycle, map[bool]string{true: "leave", false: "crash"}[graceful], victim.id, checkPlacement(t, live, rooms))
	}
}

// Three automanaged members on free loopback ports: join, graceful leave,
// rejoin under the same node id.
func TestMultiMemberAutomanagedJoinLeaveRejoin(t *testing.T) {
	store := memdb.New()
	cfg := configs.Default().Cluster
	cfg.Provider = configs.ProviderAutomanaged
	cfg.Port = 0
	cfg.RefreshInterval = 300 * time.Millisecond
	cfg.RequestTimeout = 2 * time.Second
	cfg.DrainTimeout = 5 * time.Second
	ports := []int{freePort(t), freePort(t), freePort(t)}
	for _, p := range ports {
		cfg.AutomanagedHosts = append(cfg.AutomanagedHosts, fmt.Sprintf("127.0.0.1:%d", p))
	}
	startAt := func(id string, i int) *node {
		c := cfg
		c.AutomanagedPort = ports[i]
		return startNode(t, id, memberOpts{cfg: c, store: store})
	}
	a, b, c := startAt("a", 0), startAt("b", 1), startAt("c", 2)
	live := []*node{a, b, c}
	defer func() {
		for _, n := range live {
			n.m.Stop(false)
		}
	}()
	waitReady(t, a, b, c)
	if !agreed(live) {
		t.Fatal("ready but views differ")
	}
	rooms := roomIDs(30)
	seqs := createAll(t, a, rooms)
	checkPlacement(t, live, rooms)

	c.m.Stop(true)
	live = []*node{a, b}
	if !agreed(live) {
		t.Fatal("after c left, views differ")
	}
	touchAll(t, live, rooms, seqs, "1")

	c2 := startAt("c", 2)
	live = []*node{a, b, c2}
	waitReady(t, c2)
	waitFor(t, 5*time.Second, "views to agree", func() bool { return agreed(live) })
	touchAll(t, live, rooms, seqs, "2")
	if owned := checkPlacement(t, live, rooms); owned[c2.m.Address()] == 0 {
		t.Fatalf("rejoined c owns no room: %v", owned)
	}
}

// A member another member dropped (here: blocked by hand, as a missed
// poll streak or an expired gossip heartbeat would) sees itself on the
// block list, re-registers under a new id and is admitted again.
func TestMultiMemberAutomanagedDroppedMemberRejoins(t *testing.T) {
	store := memdb.New()
	cfg := configs.Default().Cluster
	cfg.Provider = configs.ProviderAutomanaged
	cfg.Port = 0
	cfg.RefreshInterval = 300 * time.Millisecond
	ports := []int{freePort(t), freePort(t)}
	for _, p := range ports {
		cfg.AutomanagedHosts = append(cfg.AutomanagedHosts, fmt.Sprintf("127.0.0.1:%d", p))
	}
	ca, cb := cfg, cfg
	ca.AutomanagedPort, cb.AutomanagedPort = ports[0], ports[1]
	a := startNode(t, "a", memberOpts{cfg: ca, store: store})
	b := startNode(t, "b", memberOpts{cfg: cb, store: store})
	defer a.m.Stop(false)
	defer b.m.Stop(false)
	waitReady(t, a, b)
	rooms := roomIDs(20)
	seqs := createAll(t, a, rooms)
	oldID := b.m.MemberID()

	a.m.Cluster.Remote.BlockList().Block(oldID)
	took := waitFor(t, 10*time.Second, "b to rejoin", func() bool {
		return b.m.MemberID() != oldID && agreed([]*node{a, b}) && b.m.Status() == cluster.StatusServing
	})
	t.Logf("b dropped and rejoined as %s in %s", b.m.MemberID(), took.Round(time.Millisecond))
	if !strings.HasSuffix(b.m.MemberID(), "~1") {
		t.Fatalf("member id %q", b.m.MemberID())
	}
	touchAll(t, []*node{a, b}, rooms, seqs, "after")
	if owned := checkPlacement(t, []*node{a, b}, rooms); owned[b.m.Address()] == 0 {
		t.Fatalf("b owns no room after rejoin: %v", owned)
	}
}

// Proto.Actor's own metrics cost every message and future; they reach
// /metrics only with cluster.actor_metrics, and the membership metrics are
// there either way. Two members in turn: not under -race (see this
// file's build tag).
func TestMultiMemberActorMetricsOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("actor_metrics=", on), func(t *testing.T) {
			cfg := configs.Default().Cluster
			cfg.Port = 0
			cfg.ActorMetrics = on
			n := startNode(t, "solo", memberOpts{cfg: cfg, store: memdb.New(), meters: true})
			waitReady(t, n)
			exec(t, n, create("app/r1"))
			exec(t, n, join("app/r1", "bob", "j1"))
			mfs, err := n.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var actor, membership int
			for _, mf := range mfs {
				switch {
				case strings.HasPrefix(mf.GetName(), "protoactor_"):
					actor++
				case strings.HasPrefix(mf.GetName(), "roomcell_cluster_"):
					membership++
				}
			}
			if (actor > 0) != on || membership == 0 {
				t.Fatalf("actor_metrics=%v: %d protoactor_* and %d roomcell_cluster_* metric families", on, actor, membership)
			}
		})
	}
}

// Every member's etcd lease revoked at once, as an etcd leader that
// resumes after a quorum loss revokes every lease that ran out on its
// clock: no member drops another from its view at any moment (sampled
// every 20 ms), each re-registers under the same member id (its key is
// back, under a new lease; no rejoin counted), and every room answers
// with its history.
func TestMultiMemberEtcdAllLeasesLostKeepIDs(t *testing.T) {
	store := memdb.New()
	cfg := etcdConfig(t)
	o := memberOpts{cfg: cfg, store: store}
	ns := []*node{startNode(t, "a", o), startNode(t, "b", o), startNode(t, "c", o)}
	for _, n := range ns {
		defer n.m.Stop(false)
	}
	waitReady(t, ns...)
	waitFor(t, 10*time.Second, "the views to agree", func() bool { return agreed(ns) })
	rooms := roomIDs(20)
	seqs := createAll(t, ns[0], rooms)

	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.EtcdEndpoints, DialTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ids := make([]string, len(ns))
	leases := make([]clientv3.LeaseID, len(ns))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for i, n := range ns {
		ids[i] = n.m.MemberID()
		resp, err := cli.Get(ctx, cfg.EtcdBaseKey+"/"+cfg.Name+"/"+ids[i])
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s's key: %v %v", ids[i], resp, err)
		}
		leases[i] = clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	for _, l := range leases {
		if _, err := cli.Revoke(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	revoked := time.Now()
	dropped := 0
	for time.Since(revoked) < 2*cfg.EtcdLeaseTTL+time.Second {
		if !agreed(ns) {
			dropped++
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dropped != 0 {
		t.Errorf("%d samples in which a member's view lacked another member; want 0", dropped)
	}
	for i, n := range ns {
		if got := n.m.MemberID(); got != ids[i] {
			t.Errorf("member %d runs as %q after the revocation, was %q; want the same id", i, got, ids[i])
		}
		if v := metricValue(t, n, "roomcell_cluster_rejoins_total"); v != 0 {
			t.Errorf("member %d counted %v rejoins; want 0", i, v)
		}
		gctx, gcancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := cli.Get(gctx, cfg.EtcdBaseKey+"/"+cfg.Name+"/"+ids[i])
		gcancel()
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s's key after the revocation: %v %v", ids[i], resp, err)
		}
		if clientv3.LeaseID(resp.Kvs[0].Lease) == leases[i] {
			t.Errorf("%s's key is still on its revoked lease", ids[i])
		}
	}
	touchAll(t, ns, rooms, seqs, "after")
}
