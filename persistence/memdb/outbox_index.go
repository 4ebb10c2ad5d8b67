package memdb

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// Lookup arguments of the outbox indexes, encoded as go-memdb's field
// indexers encode them (their FromArgs needs no field).
var (
	strArg = &memdb.StringFieldIndex{}
	intArg = &memdb.IntFieldIndex{}
)

// outboxIndex indexes *outboxEntry rows by a key built from the row
// without reflection, exactly sized (the key is kept in the radix leaf for
// as long as the row lives). args decodes lookups and must list the key's
// fields in order. A row for which when is false is left out of the index
// (the schema sets AllowMissing).
type outboxIndex struct {
	args memdb.CompoundIndex
	when func(*outboxEntry) bool
	key  func(*outboxEntry) []byte
}

func (i outboxIndex) FromObject(raw any) (bool, []byte, error) {
	e, ok := raw.(*outboxEntry)
	if !ok {
		return false, nil, fmt.Errorf("memdb: %T is not an outbox row", raw)
	}
	if i.when != nil && !i.when(e) {
		return false, nil, nil
	}
	return true, i.key(e), nil
}

func (i outboxIndex) FromArgs(args ...any) ([]byte, error) { return i.args.FromArgs(args...) }

func (i outboxIndex) PrefixFromArgs(args ...any) ([]byte, error) {
	return i.args.PrefixFromArgs(args...)
}

// indexKey is an index key in go-memdb's field encoding: a string is its
// bytes and a 0 byte, an int64 8 big-endian bytes with the sign bit
// flipped (so negative values sort first).
type indexKey []byte

// newKey returns an empty key with room for ints int64s and strs.
func newKey(ints int, strs ...string) indexKey {
	n := 8 * ints
	for _, s := range strs {
		n += len(s) + 1
	}
	return make(indexKey, 0, n)
}

func (k indexKey) str(s string) indexKey { return append(append(k, s...), 0) }

func (k indexKey) i64(v int64) indexKey {
	return binary.BigEndian.AppendUint64(k, uint64(v)^(1<<63))
}
