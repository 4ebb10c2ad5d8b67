package memdb

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// Lookup arguments of the outbox indexes, encoded as go-memdb's field
// indexers encode them (their FromArgs needs no field).
var (
	strArg = &memdb.StringFieldIndex{}
	intArg = nibbleInt{}
)

// nibbleInt encodes an int64 lookup argument as indexKey.i64 does.
type nibbleInt struct{}

func (nibbleInt) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("memdb: an int index field takes one argument, got %d", len(args))
	}
	var v int64
	switch a := args[0].(type) {
	case int64:
		v = a
	case int:
		v = int64(a)
	case int32:
		v = int64(a)
	default:
		return nil, fmt.Errorf("memdb: int index argument %v is a %T", a, a)
	}
	return indexKey(nil).i64(v), nil
}

// rowIndex indexes T rows by a key built from the row without
// reflection, exactly sized (the key is kept in the radix leaf for as long
// as the row lives; go-memdb's CompoundIndex grows it by appending, up to
// twice its length). args decodes lookups and must list the key's fields
// in order. A row for which when is false is left out of the index (the
// schema sets AllowMissing).
type rowIndex[T any] struct {
	args memdb.CompoundIndex
	when func(T) bool
	key  func(T) []byte
}

func (i rowIndex[T]) FromObject(raw any) (bool, []byte, error) {
	r, ok := raw.(T)
	if !ok {
		return false, nil, fmt.Errorf("memdb: %T is not a %T", raw, r)
	}
	if i.when != nil && !i.when(r) {
		return false, nil, nil
	}
	return true, i.key(r), nil
}

func (i rowIndex[T]) FromArgs(args ...any) ([]byte, error) { return i.args.FromArgs(args...) }

// PrefixFromArgs reads the leading fields whole: ("app", "r1") is room r1
// only. (CompoundIndex's reads the last one as a string prefix, so the
// presence of room r1 also walked r10..r19, r100.., and StalePresence of
// r1 returned their users.)
func (i rowIndex[T]) PrefixFromArgs(args ...any) ([]byte, error) {
	if len(args) > len(i.args.Indexes) {
		return nil, fmt.Errorf("memdb: %d prefix arguments for an index of %d fields", len(args), len(i.args.Indexes))
	}
	lead := memdb.CompoundIndex{Indexes: i.args.Indexes[:len(args)]}
	return lead.FromArgs(args...)
}

// fields lists lookup arguments: strArg and intArg.
func fields(f ...memdb.Indexer) memdb.CompoundIndex { return memdb.CompoundIndex{Indexes: f} }

// indexKey is an index key: a string is its bytes and a 0 byte (go-memdb's
// field encoding), an int64 its 16 big-endian nibbles, a byte each, with
// the sign bit flipped (so negative values sort first).
//
// Nibbles, not go-memdb's 8 bytes: a radix node has an edge per distinct
// next byte, and dense integers (seqs, millisecond times) fill nodes with
// up to 256 edges, which every insert below them copies (copy-on-write)
// and grows: ~8–12 KB per insert into a time or seq index. With nibbles a
// node has at most 16 edges (issue 13: BenchmarkAppendConcurrent).
type indexKey []byte

// newKey returns an empty key with room for ints int64s and strs.
func newKey(ints int, strs ...string) indexKey {
	n := 16 * ints
	for _, s := range strs {
		n += len(s) + 1
	}
	return make(indexKey, 0, n)
}

func (k indexKey) str(s string) indexKey { return append(append(k, s...), 0) }

func (k indexKey) i64(v int64) indexKey {
	u := uint64(v) ^ (1 << 63)
	for shift := 60; shift >= 0; shift -= 4 {
		k = append(k, byte(u>>shift)&0xf)
	}
	return k
}
