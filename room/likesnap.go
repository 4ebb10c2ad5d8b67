package room

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// A liked room's snapshot is mostly its like receipts (each liker's
// newest MaxLikeReceipts). They are encoded off the room's goroutine
// (EncodeLikeReceipts, as each window's row replaces them) and the
// snapshot takes that encoding as it is (MarshalWithLikeReceipts).

// LikeReceipts is the room's receipts by user. The map is never changed
// in place (each window's row replaces it), so it may be read on any
// goroutine: read it, never change it.
func (s State) LikeReceipts() map[string]LikeReceipts {
	if s.Extra == nil {
		return nil
	}
	return s.Extra.LikeReceipts
}

// EncodeLikeReceipts is rs as a snapshot holds it: each user's receipts
// packed (9 bytes a receipt, as a window's row packs them), or as their
// strings when one does not pack. UnmarshalState reads either.
func EncodeLikeReceipts(rs map[string]LikeReceipts) []byte {
	b := make([]byte, 0, 64+len(rs)*(48+MaxLikeReceipts*12))
	b = append(b, '{')
	for i, u := range slices.Sorted(maps.Keys(rs)) {
		if i > 0 {
			b = append(b, ',')
		}
		r := rs[u]
		b = append(appendJSONString(b, u), ':')
		mark := len(b)
		b = strconv.AppendInt(append(b, `{"last_ms":`...), r.LastMs, 10)
		b = append(b, `,"packed":"`...)
		var ok bool
		if b, ok = appendPacked(b, r.IDs); ok {
			b = append(b, `"}`...)
			continue
		}
		one, _ := json.Marshal(likeReceiptsStored{LastMs: r.LastMs, IDs: r.IDs}) // strings and ints: cannot fail
		b = append(b[:mark], one...)
	}
	return append(b, '}')
}

// MarshalWithLikeReceipts is Marshal with the receipts given encoded
// (EncodeLikeReceipts of the state's own receipts), not encoded again:
// the state without them is marshalled, and the receipts written into
// its extra part, the last field of State (encoding/json would scan a
// json.RawMessage of them byte by byte, which costs what encoding them
// does).
func (s State) MarshalWithLikeReceipts(receipts []byte) ([]byte, error) {
	if s.Extra == nil || receipts == nil {
		return s.Marshal()
	}
	x := *s.Extra
	x.LikeReceipts = nil
	s.Extra = &x
	b, err := s.Marshal()
	if err != nil {
		return nil, err
	}
	// b ends with the extra part's closing brace and the state's.
	if len(b) < 3 || b[len(b)-1] != '}' || b[len(b)-2] != '}' {
		return nil, fmt.Errorf("room state JSON does not end with its extra part: %q", b[max(0, len(b)-16):])
	}
	out := make([]byte, 0, len(b)+len(receipts)+20)
	out = append(out, b[:len(b)-2]...)
	if b[len(b)-3] != '{' {
		out = append(out, ',')
	}
	out = append(append(append(out, `"like_receipts":`...), receipts...), '}', '}')
	return out, nil
}
