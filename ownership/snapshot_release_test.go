package ownership

import (
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func kv(key, val string, rev int64, lease clientv3.LeaseID) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(val), CreateRevision: rev, ModRevision: rev, Lease: int64(lease)}
}

// A shard this node gave up whose key a read of the table shows gone (the
// watch broke before its delete event) is no longer being released: kept
// marked, the shard would never be served here again, even once this
// node took it back (Hold refuses a shard being released, and a release
// never starts twice).
func TestEtcdReadEndsReleaseWhoseKeyWent(t *testing.T) {
	e := &Etcd{cfg: EtcdConfig{Prefix: "t", Shards: 4, TTL: 2 * time.Second}, self: "a", lease: 100,
		nodes: map[string]bool{}, departed: map[string]time.Time{}, owners: make([]grant, 4), releasing: map[int]bool{}}
	e.mu.Lock()
	e.replaceLocked([]*mvccpb.KeyValue{kv("t/nodes/a", "a", 5, 100), kv("t/shards/2", "a", 6, 100), kv("t/shards/3", "a", 6, 100)})
	e.releasing[2] = true
	e.releasing[3] = true
	// Read after shard 2's key went (released); shard 3's delete is in flight.
	e.replaceLocked([]*mvccpb.KeyValue{kv("t/nodes/a", "a", 5, 100), kv("t/shards/3", "a", 6, 100)})
	if e.releasing[2] {
		t.Errorf("shard 2 still marked released after a read showed its key gone")
	}
	if !e.releasing[3] {
		t.Errorf("shard 3, whose key is still this node's, lost its release mark")
	}
	// Taken again (the watch's event of its new key): held.
	e.applyLocked("t/shards/2", "a", 10, 100, false)
	e.validUntil = time.Now().Add(time.Minute)
	e.mu.Unlock()
	id := ""
	for i := 0; id == ""; i++ {
		if c := "app/r" + strconv.Itoa(i); ShardOf(c, 4) == 2 {
			id = c
		}
	}
	if _, ok := e.Hold(id); !ok {
		t.Errorf("room %s of shard 2, taken again, is not held", id)
	}
}
