package ownership

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every node's lease revoked at once, as an etcd leader that resumes
// after a quorum loss does with every lease that ran out on its clock:
// the nodes' renewals stop getting through (frozen here) until each
// stopped serving, then the leases are revoked and the renewals resume;
// each node learns it from the watch and stops its grains (onLost gets
// its shards) before its own renewal is refused, then re-registers, and
// the nodes come back where they were: each takes only its own shards
// again (under new epochs), none takes another's for a moment (without
// the re-registration grace the first node back took every shard and
// handed two thirds back), and no room is ever held by two nodes.
func TestEtcdAllLeasesRevokedEachNodeRetakesItsOwn(t *testing.T) {
	tables := startTables(t, 3)
	rooms := shardRooms()
	waitConverged(t, tables, rooms, 10*time.Second)
	lostTo := make([]chan []int, len(tables))
	for i, e := range tables {
		ch := make(chan []int, 64)
		lostTo[i] = ch
		e.mu.Lock()
		e.onLost = func(s []int) { ch <- s }
		e.mu.Unlock()
	}
	owner := ownersNow(tables, rooms)
	_, before := holders(tables, rooms)
	stopForeign := foreignHolds(tables, rooms, owner)
	stopDoubles := watchdog(tables, rooms)

	freezeAll(t, tables, testTTL+500*time.Millisecond)
	cli := testClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	for _, e := range tables {
		e.mu.RLock()
		lease := e.lease
		e.mu.RUnlock()
		if _, err := cli.Revoke(ctx, lease); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	revoked := time.Now()

	for i, ch := range lostTo {
		got := 0
		deadline := time.After(testTTL)
		for got < tables[i].cfg.Shards/3-1 {
			select {
			case s := <-ch:
				got += len(s)
			case <-deadline:
				t.Fatalf("node %d was told of %d lost shards within %s of the revocation; want its share", i, got, testTTL)
			}
		}
	}
	told := time.Since(revoked)
	waitAllHeld(t, tables, rooms, 3*testTTL)
	back := time.Since(revoked)
	time.Sleep(testTTL + 500*time.Millisecond) // past the grace: nothing moves then either
	waitConverged(t, tables, rooms, 5*time.Second)
	foreign := stopForeign()
	if n := stopDoubles(); n != 0 {
		t.Errorf("%d observations of a room held by two nodes", n)
	}
	if n := foreign; n != 0 {
		t.Errorf("%d observations of a node holding a room another node held before the revocation; want 0", n)
	}
	_, after := holders(tables, rooms)
	for r, id := range rooms {
		if _, ok := tables[owner[r]].Hold(id); !ok {
			t.Errorf("room %s is no longer on node %d", id, owner[r])
		} else if after[r] <= before[r] {
			t.Errorf("room %s retaken under epoch %d, not above %d", id, after[r], before[r])
		}
	}
	t.Logf("every node told of its lost shards %s after the revocation; every room held again %s after it, each by its old node",
		told.Round(time.Millisecond), back.Round(time.Millisecond))
}

// ownersNow is, per room, the index of the table that holds it now.
func ownersNow(tables []*Etcd, rooms []string) []int {
	owner := make([]int, len(rooms))
	for r, id := range rooms {
		for i, e := range tables {
			if _, ok := e.Hold(id); ok {
				owner[r] = i
			}
		}
	}
	return owner
}

// foreignHolds counts, every 2 ms until stop, the observations of a table
// holding a room that another table (owner) held before.
func foreignHolds(tables []*Etcd, rooms []string, owner []int) (stop func() int64) {
	var foreign atomic.Int64
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
			for r, id := range rooms {
				for i, e := range tables {
					if _, ok := e.Hold(id); ok && i != owner[r] {
						foreign.Add(1)
					}
				}
			}
		}
	}()
	return func() int64 { close(done); wg.Wait(); return foreign.Load() }
}

// Every node's liveness lease revoked at once while none could renew, as
// an etcd leader that resumes after a quorum loss does (its lessor
// revokes every lease that ran out on its clock; the hold leases, long,
// did not): no node is told of a lost shard, each re-attaches its shards
// to a new liveness lease and holds every room it held before under the
// same epoch (no room reloads), none holds another's room for a moment,
// no room is held twice, and nothing moves after the calm period either.
func TestEtcdLivenessRevokedShardsStayInPlace(t *testing.T) {
	tables := startTables(t, 3)
	rooms := shardRooms()
	waitConverged(t, tables, rooms, 10*time.Second)
	var told atomic.Int64
	for _, e := range tables {
		e.mu.Lock()
		e.onLost = func(s []int) { told.Add(int64(len(s))) }
		e.mu.Unlock()
	}
	owner := ownersNow(tables, rooms)
	_, before := holders(tables, rooms)
	stopForeign := foreignHolds(tables, rooms, owner)
	stopDoubles := watchdog(tables, rooms)

	outage := testTTL + 500*time.Millisecond
	frozen := freezeAll(t, tables, outage)
	cli := testClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	for _, e := range tables {
		e.mu.RLock()
		live := e.live
		e.mu.RUnlock()
		// Already expired (the renewals stopped up to a TTL ago) is gone
		// all the same.
		if _, err := cli.Revoke(ctx, live); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			t.Fatal(err)
		}
	}
	cancel()
	time.Sleep(time.Until(frozen.Add(outage)))
	resumed := time.Now()
	waitAllHeld(t, tables, rooms, 3*testTTL)
	back := time.Since(resumed)
	time.Sleep(testTTL + 500*time.Millisecond) // past the calm period: nothing moves then either
	waitConverged(t, tables, rooms, 5*time.Second)
	nothingMoved(t, tables, rooms, owner, before, stopForeign(), stopDoubles(), told.Load())
	if back > testTTL {
		t.Errorf("every room held again %s after the resume; want within one TTL (%s)", back, testTTL)
	}
	t.Logf("every room held again by its old node under its old epoch %s after the resume", back.Round(time.Millisecond))
}

// One node's liveness lease revoked while the node serves and renews, as
// an etcd leader that resumes after its own pause does with every lease
// that ran out on its clock (the others' renewals reached the new
// leader): the other nodes, long calm, see the node's live key and node
// key go and would take its shards at once. They must not: the node
// re-attaches within the takeover grace (its watch shows its live key
// gone), so no room changes node or epoch, nobody is told of a lost
// shard, and no room is held twice or by another node for a moment.
func TestEtcdLivenessRevokedUnderServingNodeNothingMoves(t *testing.T) {
	tables := startTables(t, 3)
	rooms := shardRooms()
	waitConverged(t, tables, rooms, 10*time.Second)
	time.Sleep(testTTL) // every node past its calm period: takeovers allowed
	var told atomic.Int64
	for _, e := range tables {
		e.mu.Lock()
		e.onLost = func(s []int) { told.Add(int64(len(s))) }
		e.mu.Unlock()
	}
	owner := ownersNow(tables, rooms)
	_, before := holders(tables, rooms)
	stopForeign := foreignHolds(tables, rooms, owner)
	stopDoubles := watchdog(tables, rooms)

	victim := tables[0]
	victim.mu.RLock()
	live := victim.live
	victim.mu.RUnlock()
	cli := testClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err := cli.Revoke(ctx, live)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for {
		// Serving takes the table's lock itself: a second read lock
		// while a writer waits would deadlock.
		victim.mu.RLock()
		relive := victim.live != live && victim.live != 0
		victim.mu.RUnlock()
		if relive && victim.Serving() {
			break
		}
		if time.Since(revoked) > testTTL {
			t.Fatalf("the node did not re-attach within %s of its liveness lease's revocation", testTTL)
		}
		time.Sleep(time.Millisecond)
	}
	reattached := time.Since(revoked)
	time.Sleep(2 * testTTL) // past every grace and calm period: nothing moves then either
	nothingMoved(t, tables, rooms, owner, before, stopForeign(), stopDoubles(), told.Load())
	if reattached >= victim.orphanGrace() {
		t.Errorf("the node re-attached %s after the revocation; want within the takeover grace %s", reattached, victim.orphanGrace())
	}
	t.Logf("the revoked node re-attached %s after the revocation; nothing moved", reattached.Round(time.Millisecond))
}

// The same revocation while the node cannot re-attach (its renewals
// frozen past the takeover grace, as a node paused just then): the grace
// must not keep its rooms nowhere for long, nor let two nodes hold one
// room. The others take its shards after the grace, under higher epochs;
// the node, back, holds none of the rooms taken from it, and no room is
// ever held twice.
func TestEtcdLivenessRevokedUnderFrozenNodeTakenOverAfterGrace(t *testing.T) {
	tables := startTables(t, 3)
	victim := tables[0]
	took := revokeFrozen(t, tables)
	if took < victim.orphanGrace() {
		t.Errorf("the others held the revoked node's rooms %s after the revocation; want not before the grace %s", took, victim.orphanGrace())
	}
	if took > victim.orphanGrace()+time.Second {
		t.Errorf("the others held the revoked node's rooms %s after the revocation; want within the grace %s + 1 s", took, victim.orphanGrace())
	}
	t.Logf("the frozen node's rooms held by the others %s after the revocation of its liveness", took.Round(time.Millisecond))
}

// A node whose liveness went and whose address refuses connections is
// gone (killed): its shards are taken without the grace, which only
// waits for a live owner to re-attach. One whose address still accepts
// (a paused process: the kernel completes the handshake) keeps the
// grace. Either way no room is held twice and the epochs rise.
func TestEtcdLivenessGoneOwnerRefusingTakenOverWithoutGrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listen bool
	}{{"refusing", false}, {"accepting", true}} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			if tc.listen {
				t.Cleanup(func() { l.Close() })
			} else {
				l.Close()
			}
			tables := startTablesAt(t, []string{addr, "node-1", "node-2"})
			victim := tables[0]
			took := revokeFrozen(t, tables)
			if tc.listen && took < victim.orphanGrace() {
				t.Errorf("the others held an accepting owner's rooms %s after the revocation; want not before the grace %s", took, victim.orphanGrace())
			}
			if !tc.listen && took >= victim.orphanGrace() {
				t.Errorf("the others held a refusing owner's rooms %s after the revocation; want before the grace %s", took, victim.orphanGrace())
			}
			t.Logf("%s owner: its rooms held by the others %s after the revocation (grace %s)", tc.name, took.Round(time.Millisecond), victim.orphanGrace())
		})
	}
}

// revokeFrozen freezes tables[0]'s renewals past the takeover grace,
// revokes its liveness lease, and returns how long after the revocation
// the other tables held all its rooms. It checks that no room was held
// twice and that every room taken holds a higher epoch than before.
func revokeFrozen(t *testing.T, tables []*Etcd) time.Duration {
	t.Helper()
	rooms := shardRooms()
	waitConverged(t, tables, rooms, 10*time.Second)
	time.Sleep(testTTL)
	_, before := holders(tables, rooms)
	stopDoubles := watchdog(tables, rooms)
	victim := tables[0]
	var victimRooms []int
	for r, id := range rooms {
		if _, ok := victim.Hold(id); ok {
			victimRooms = append(victimRooms, r)
		}
	}
	victim.mu.RLock()
	live := victim.live
	victim.mu.RUnlock()
	freeze := testTTL
	victim.freeze <- freeze
	frozen := time.Now()
	cli := testClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err := cli.Revoke(ctx, live)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	took := waitAllHeld(t, tables[1:], rooms, freeze)
	time.Sleep(time.Until(frozen.Add(freeze + testTTL)))
	waitConverged(t, tables, rooms, 10*time.Second)
	if n := stopDoubles(); n != 0 {
		t.Errorf("%d observations of a room held by two nodes", n)
	}
	_, after := holders(tables, rooms)
	for _, r := range victimRooms {
		if after[r] <= before[r] {
			t.Errorf("room %s held under epoch %d after the takeover, %d before; want it higher", rooms[r], after[r], before[r])
		}
	}
	return took
}

// testClient is an etcd client of the test's own, closed with the test.
func testClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(EtcdClientConfig([]string{etcdEndpoint()}, nil, "", "", dialTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// freezeAll stops every table's renewals for outage, waits until none
// may serve any more (a TTL less the margin), checks that none does, and
// returns when the freeze began.
func freezeAll(t *testing.T, tables []*Etcd, outage time.Duration) time.Time {
	t.Helper()
	for _, e := range tables {
		e.freeze <- outage
	}
	frozen := time.Now()
	time.Sleep(testTTL - testMargin + 100*time.Millisecond)
	for i, e := range tables {
		if e.Serving() {
			t.Fatalf("node %d still serves %s after its renewals stopped", i, time.Since(frozen))
		}
	}
	return frozen
}

// nothingMoved checks that a revocation moved nothing: no room held by
// two nodes (doubles) or by a node other than its owner before (foreign),
// no node told of a lost shard, and every room still on its owner under
// the epoch it had before.
func nothingMoved(t *testing.T, tables []*Etcd, rooms []string, owner []int, before []int64, foreign, doubles, told int64) {
	t.Helper()
	if doubles != 0 {
		t.Errorf("%d observations of a room held by two nodes", doubles)
	}
	if foreign != 0 {
		t.Errorf("%d observations of a node holding a room another node held before the revocation; want 0", foreign)
	}
	if told != 0 {
		t.Errorf("nodes were told of %d lost shards; want 0 (the shard keys stay on the hold leases)", told)
	}
	_, after := holders(tables, rooms)
	for r, id := range rooms {
		if _, ok := tables[owner[r]].Hold(id); !ok {
			t.Errorf("room %s is no longer on node %d", id, owner[r])
		} else if after[r] != before[r] {
			t.Errorf("room %s held under epoch %d after the revocation, %d before; want the same", id, after[r], before[r])
		}
	}
}
