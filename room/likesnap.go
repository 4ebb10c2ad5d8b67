package room

import (
	"encoding/json"
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
// (EncodeLikeReceipts of the state's own receipts), not encoded again.
func (s State) MarshalWithLikeReceipts(receipts []byte) ([]byte, error) {
	if s.Extra == nil || receipts == nil {
		return s.Marshal()
	}
	x := *s.Extra
	x.LikeReceipts = nil
	return json.Marshal(stateWithReceipts{State: s, Extra: &extraWithReceipts{Extra: &x, LikeReceipts: receipts}})
}

// stateWithReceipts is a State whose extra part carries its receipts
// encoded: the outer fields hide the embedded ones of the same name
// (encoding/json's rule for embedded structs).
type stateWithReceipts struct {
	State
	Extra *extraWithReceipts `json:"extra,omitempty"`
}

type extraWithReceipts struct {
	*Extra
	LikeReceipts json.RawMessage `json:"like_receipts,omitempty"`
}
