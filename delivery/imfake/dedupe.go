package imfake

import "time"

// dedupe is one of Tencent's dedupe windows: a key seen less than span
// ago is a duplicate. Keys are forgotten in the order they were recorded,
// a few per call, so a long run costs O(1) per message instead of a sweep
// of the whole map.
type dedupe[K comparable] struct {
	span  time.Duration
	hits  map[K]dedupeHit
	order []recorded[K] // oldest first
}

type recorded[K comparable] struct {
	key K
	at  time.Time
}

func newDedupe[K comparable](span time.Duration) *dedupe[K] {
	return &dedupe[K]{span: span, hits: map[K]dedupeHit{}}
}

// seen returns the hit for key if it is inside the window at now.
func (d *dedupe[K]) seen(key K, now time.Time) (dedupeHit, bool) {
	hit, ok := d.hits[key]
	return hit, ok && now.Sub(hit.at) < d.span
}

// record stores a hit at hit.at and forgets what passed the window.
func (d *dedupe[K]) record(key K, hit dedupeHit) {
	d.hits[key] = hit
	d.order = append(d.order, recorded[K]{key: key, at: hit.at})
	i := 0
	for ; i < len(d.order) && hit.at.Sub(d.order[i].at) >= d.span; i++ {
		// A key recorded again later has a newer hit: keep that one.
		if h, ok := d.hits[d.order[i].key]; ok && h.at.Equal(d.order[i].at) {
			delete(d.hits, d.order[i].key)
		}
	}
	d.order = d.order[i:]
}
