package imfake

import "time"

// dedupe is one of Tencent's dedupe windows: a key seen less than span
// ago is a duplicate. Keys are forgotten in the order they were recorded,
// a few per call, so a long run costs O(1) per message instead of a sweep
// of the whole map. Times are kept as Unix nanoseconds: a time.Time is
// 24 bytes, and the window holds every message of its span (~50 bytes a
// room of a dev node less).
type dedupe[K comparable] struct {
	span  time.Duration
	hits  map[K]keptHit
	order []recorded[K] // oldest first
}

type keptHit struct {
	atNs   int64
	seq    uint64
	msgKey string
}

type recorded[K comparable] struct {
	key  K
	atNs int64
}

func newDedupe[K comparable](span time.Duration) *dedupe[K] {
	return &dedupe[K]{span: span, hits: map[K]keptHit{}}
}

// seen returns the hit for key if it is inside the window at now.
func (d *dedupe[K]) seen(key K, now time.Time) (dedupeHit, bool) {
	k, ok := d.hits[key]
	if !ok || now.UnixNano()-k.atNs >= int64(d.span) {
		return dedupeHit{}, false
	}
	return dedupeHit{at: time.Unix(0, k.atNs), seq: k.seq, msgKey: k.msgKey}, true
}

// record stores a hit at hit.at and forgets what passed the window.
func (d *dedupe[K]) record(key K, hit dedupeHit) {
	at := hit.at.UnixNano()
	d.hits[key] = keptHit{atNs: at, seq: hit.seq, msgKey: hit.msgKey}
	d.order = append(d.order, recorded[K]{key: key, atNs: at})
	i := 0
	for ; i < len(d.order) && at-d.order[i].atNs >= int64(d.span); i++ {
		// A key recorded again later has a newer hit: keep that one.
		if h, ok := d.hits[d.order[i].key]; ok && h.atNs == d.order[i].atNs {
			delete(d.hits, d.order[i].key)
		}
	}
	d.order = d.order[i:]
}
