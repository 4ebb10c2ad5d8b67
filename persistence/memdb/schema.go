package memdb

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// Table and index names of the room domain.
const (
	tableSnapshots    = "room_snapshots"
	tableGiftOutcomes = "room_gift_outcomes"

	indexID        = "id"
	indexCommandID = "command_id"
	indexStatus    = "status"
)

// roomTables lists the room domain's tables; roomSchema assembles them.
var roomTables = []func() *memdb.TableSchema{
	roomSnapshotsTable,
	roomGiftOutcomesTable,
	roomFencesTable, // fence.go
}

// roomSchema is the schema of the room MemDB.
func roomSchema() *memdb.DBSchema {
	return newSchema(roomTables...)
}

// newSchema assembles tables into one DBSchema. A duplicate name is a
// programming error, caught at start-up rather than by a silently replaced
// table.
func newSchema(tables ...func() *memdb.TableSchema) *memdb.DBSchema {
	db := &memdb.DBSchema{Tables: make(map[string]*memdb.TableSchema, len(tables))}
	for _, table := range tables {
		schema := table()
		if _, ok := db.Tables[schema.Name]; ok {
			panic(fmt.Sprintf("memdb: duplicate table %q", schema.Name))
		}
		db.Tables[schema.Name] = schema
	}
	return db
}

// roomSnapshotsTable holds *persistence.Snapshot rows, one per room.
func roomSnapshotsTable() *memdb.TableSchema {
	return table(tableSnapshots,
		// id serves LoadSnapshot and the newer-only check of
		// SaveSnapshot and Append.
		index(indexID, true, strField("AppCode"), strField("RoomID")))
}

// giftOutcome is a room_gift_outcomes row: "sent" or "void" for one gift
// command_id, whichever was written first (persistence.RoomStore.VoidGift).
type giftOutcome struct {
	AppCode, RoomID, CommandID string
	Sent                       bool
	CreatedAtMs                int64
}

func roomGiftOutcomesTable() *memdb.TableSchema {
	return table(tableGiftOutcomes, index(indexID, true, strField("AppCode"), strField("RoomID"), strField("CommandID")))
}

// table is a table schema with indexes, each under its own name.
func table(name string, indexes ...*memdb.IndexSchema) *memdb.TableSchema {
	t := &memdb.TableSchema{Name: name, Indexes: make(map[string]*memdb.IndexSchema, len(indexes))}
	for _, ix := range indexes {
		t.Indexes[ix.Name] = ix
	}
	return t
}

// index is an index over fields, in order: one field is indexed by
// itself, more by a compound index.
func index(name string, unique bool, fields ...memdb.Indexer) *memdb.IndexSchema {
	ix := &memdb.IndexSchema{Name: name, Unique: unique, Indexer: &memdb.CompoundIndex{Indexes: fields}}
	if len(fields) == 1 {
		ix.Indexer = fields[0]
	}
	return ix
}

func strField(field string) memdb.Indexer { return &memdb.StringFieldIndex{Field: field} }
func intField(field string) memdb.Indexer { return &memdb.IntFieldIndex{Field: field} }
