package imfake

import (
	"testing"
	"time"
)

// The window answers duplicates inside its span, forgets keys once they
// pass it (the map stays as small as the window's traffic), and a key
// recorded again keeps its newer hit when the older record expires.
func TestDedupeForgetsInOrder(t *testing.T) {
	d := newDedupe[int](10 * time.Second)
	t0 := time.Unix(1000, 0)
	for i := range 100 {
		d.record(i, dedupeHit{at: t0.Add(time.Duration(i) * time.Second), seq: uint64(i)})
		if len(d.hits) > 10 || len(d.order) > 10 {
			t.Fatalf("after %d s: %d hits, %d queued; want at most the 10 inside the window", i, len(d.hits), len(d.order))
		}
	}
	now := t0.Add(99 * time.Second)
	if _, ok := d.seen(95, now); !ok {
		t.Fatal("a key 4 s old is not a duplicate")
	}
	if _, ok := d.seen(80, now); ok {
		t.Fatal("a key 19 s old is still a duplicate")
	}
	// Key 1000 recorded at 100 s and again (after its window) at 111 s:
	// the first record expiring must not take the second hit with it.
	d.record(1000, dedupeHit{at: t0.Add(100 * time.Second), seq: 1})
	d.record(1000, dedupeHit{at: t0.Add(111 * time.Second), seq: 2})
	d.record(7, dedupeHit{at: t0.Add(115 * time.Second)})
	if hit, ok := d.seen(1000, t0.Add(115*time.Second)); !ok || hit.seq != 2 {
		t.Fatalf("key recorded again: %+v %v, want the newer hit", hit, ok)
	}
}
