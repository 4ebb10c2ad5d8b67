package ownership

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// offlineTable is an Etcd whose table is fed by hand (no etcd): what the
// watch and the snapshot reads would apply.
func offlineTable(self string, shards int) *Etcd {
	return &Etcd{cfg: EtcdConfig{Prefix: "t", Shards: shards, TTL: 2 * time.Second}, self: self, lease: 100,
		nodes: map[string]bool{}, alive: map[clientv3.LeaseID]bool{}, liveGone: map[clientv3.LeaseID]time.Time{}, departed: map[string]time.Time{}, renewNow: make(chan struct{}, 1),
		owners: make([]grant, shards), releasing: map[int]bool{}}
}

func kv(key, val string, rev int64, lease clientv3.LeaseID) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), CreateRevision: rev, ModRevision: rev, Lease: int64(lease)}
}

func put(k *mvccpb.KeyValue) *clientv3.Event {
	return (*clientv3.Event)(&mvccpb.Event{Type: mvccpb.PUT, Kv: k})
}

func del(key string, rev int64) *clientv3.Event {
	return (*clientv3.Event)(&mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}})
}

// Every node re-attaches at once after an etcd outage. This node's
// re-attach read the table before node c re-attached, but the watch
// showed c's keys come back before the re-attach applied its read: the
// older read must not take c out of the table (the watch will not show
// its keys again), or this node computes the assignment without c, gives
// up shards that c's and b's tables say are its own, and nobody takes
// them: their rooms answer nowhere. Found by the 3-node quorum-loss test
// (2 shards given up and left unowned after a quorum loss).
func TestEtcdOlderSnapshotDoesNotUndoWatchedEvents(t *testing.T) {
	e := offlineTable("a", 16)
	e.mu.Lock()
	defer e.mu.Unlock()
	base := []*mvccpb.KeyValue{
		kv("t/nodes/a", "a", 10, 1), kv("t/nodes/b", "b", 10, 2), kv("t/nodes/c", "c", 10, 3),
	}
	e.replaceLocked(base, 10)
	// The outage's end: c's liveness revoked (11), c re-attached (13).
	e.applyEventsLocked([]*clientv3.Event{del("t/nodes/c", 11), put(kv("t/nodes/c", "c", 13, 4))})
	// This node's re-attach read, taken at 12, applied now.
	lost := e.replaceLocked([]*mvccpb.KeyValue{kv("t/nodes/a", "a", 10, 1), kv("t/nodes/b", "b", 10, 2)}, 12)
	if len(lost) != 0 {
		t.Errorf("the older read reported lost shards %v; want none", lost)
	}
	if !e.nodes["c"] {
		t.Fatalf("node c left the table after an older read than the watch's last event; nodes %v", e.nodes)
	}
	want := Assign([]string{"a", "b", "c"}, 16)
	nodes := make([]string, 0, len(e.nodes))
	for n := range e.nodes {
		nodes = append(nodes, n)
	}
	if got := Assign(nodes, 16); !slices.Equal(got, want) {
		t.Errorf("assignment over the table's nodes %v differs from the one over a, b, c", nodes)
	}
	// A newer read still replaces the table (its events are past).
	e.replaceLocked([]*mvccpb.KeyValue{kv("t/nodes/a", "a", 10, 1), kv("t/nodes/c", "c", 13, 4)}, 14)
	if e.nodes["b"] || !e.nodes["c"] {
		t.Errorf("a newer read was not applied: nodes %v", e.nodes)
	}
	// Events the newer read reflects are not applied again.
	e.applyEventsLocked([]*clientv3.Event{put(kv("t/nodes/b", "b", 14, 5))})
	if e.nodes["b"] {
		t.Errorf("an event at the read's revision was applied again after it")
	}
	// The events of one transaction share its revision: all are applied.
	e.applyEventsLocked([]*clientv3.Event{del("t/nodes/a", 15), del("t/nodes/c", 15)})
	if e.nodes["a"] || e.nodes["c"] {
		t.Errorf("the second event of a transaction was skipped: nodes %v", e.nodes)
	}
}

// A shard this node gave up whose key a read shows gone (the watch broke
// before its delete event) is no longer being released: kept marked, the
// shard would stay unservable here when this node takes it again.
func TestEtcdSnapshotEndsReleaseWhoseKeyWent(t *testing.T) {
	e := offlineTable("a", 4)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.replaceLocked([]*mvccpb.KeyValue{kv("t/nodes/a", "a", 5, 1), kv("t/shards/2", "a", 6, 100), kv("t/shards/3", "a", 6, 100)}, 6)
	e.releasing[2] = true
	e.releasing[3] = true
	// Read after shard 2's key went (released); shard 3's delete is in flight.
	e.replaceLocked([]*mvccpb.KeyValue{kv("t/nodes/a", "a", 5, 1), kv("t/shards/3", "a", 6, 100)}, 9)
	if e.releasing[2] {
		t.Errorf("shard 2 still marked released after a read showed its key gone")
	}
	if !e.releasing[3] {
		t.Errorf("shard 3, whose key is still this node's, lost its release mark")
	}
	// Taken again: held.
	e.applyEventsLocked([]*clientv3.Event{put(kv("t/shards/"+strconv.Itoa(2), "a", 10, 100))})
	e.validUntil = time.Now().Add(time.Minute)
	e.mu.Unlock()
	defer e.mu.Lock()
	for _, id := range shardRoomsOf(4, 2) {
		if _, ok := e.Hold(id); !ok {
			t.Errorf("room %s of shard 2, taken again, is not held", id)
		}
	}
}

// shardRoomsOf returns a room id of shard s of n.
func shardRoomsOf(n, s int) []string {
	for i := 0; ; i++ {
		id := "app/r" + strconv.Itoa(i)
		if ShardOf(id, n) == s {
			return []string{id}
		}
	}
}

// An etcd leader that resumes after an outage revokes the liveness
// leases that ran out on its clock, the others' and this node's, while
// this node still counts itself serving: the watch shows every node key
// gone. This node stops serving at once (the others may take its shards
// now) and computes no assignment until it re-attached: over the nodes
// left it would give up every shard it holds (seen: two nodes of three
// gave up all their shards after an etcd leader's 10 s pause, and their
// rooms reloaded elsewhere).
func TestEtcdOwnLivenessGoneReleasesNothing(t *testing.T) {
	e := offlineTable("a", 8)
	e.mu.Lock()
	var kvs []*mvccpb.KeyValue
	for i, n := range []string{"a", "b", "c"} {
		hold := clientv3.LeaseID(100 + i)
		kvs = append(kvs, kv("t/nodes/"+n, n, 10, 1), kv("t/live/"+strconv.FormatInt(int64(hold), 16), n, 10, 1))
	}
	want := Assign([]string{"a", "b", "c"}, 8)
	for s, n := range want {
		kvs = append(kvs, kv("t/shards/"+strconv.Itoa(s), n, 11, clientv3.LeaseID(100+int(n[0]-'a'))))
	}
	e.replaceLocked(kvs, 11)
	e.live = 7
	e.validUntil = time.Now().Add(time.Minute)
	var released []int
	e.onLost = func(s []int) { released = append(released, s...) }
	// The revocation: every node key and live key goes.
	var evs []*clientv3.Event
	for i, n := range []string{"a", "b", "c"} {
		evs = append(evs, del("t/nodes/"+n, 12), del("t/live/"+strconv.FormatInt(int64(100+i), 16), 12))
	}
	e.applyEventsLocked(evs)
	e.mu.Unlock()
	if e.Serving() {
		t.Errorf("still serving after the table showed this node's liveness gone")
	}
	// Serving or not, the reconcile must not act on this table: force it.
	e.mu.Lock()
	e.validUntil = time.Now().Add(time.Minute)
	e.mu.Unlock()
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("reconcile went to etcd over a table without this node: %v", p)
			}
		}()
		e.reconcile()
	}()
	if len(released) != 0 {
		t.Errorf("gave up %d shards over a table without this node; want 0", len(released))
	}
}
