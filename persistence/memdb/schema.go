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
	return &memdb.TableSchema{
		Name: tableSnapshots,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves LoadSnapshot and the newer-only check of
			// SaveSnapshot and Append.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "RoomID"},
				}},
			},
		},
	}
}

// giftOutcome is a room_gift_outcomes row: "sent" or "void" for one gift
// command_id, whichever was written first (persistence.RoomStore.VoidGift).
type giftOutcome struct {
	AppCode, RoomID, CommandID string
	Sent                       bool
	CreatedAtMs                int64
}

func roomGiftOutcomesTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableGiftOutcomes,
		Indexes: map[string]*memdb.IndexSchema{
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "RoomID"},
					&memdb.StringFieldIndex{Field: "CommandID"},
				}},
			},
		},
	}
}
