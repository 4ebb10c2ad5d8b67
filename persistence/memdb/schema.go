package memdb

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/persistence"
)

// Table and index names of the room domain.
const (
	tableCommandLog   = "room_command_log"
	tableOutbox       = "room_outbox"
	tableSnapshots    = "room_snapshots"
	tableGiftOutcomes = "room_gift_outcomes"

	indexID        = "id"
	indexCommandID = "command_id"
	indexStatus    = "status"
	indexDue       = "pending_due"
	indexRoom      = "room_seq"
	indexMQ        = "mq_pending"
)

// roomTables lists the room domain's tables; roomSchema assembles them.
var roomTables = []func() *memdb.TableSchema{
	roomCommandLogTable,
	roomOutboxTable,
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

// roomCommandLogTable holds *persistence.CommandRecord rows. Lookups by
// command_id go through Store.commands, not an index here.
func roomCommandLogTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableCommandLog,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves the seq fence of Append and LoadCommands' ordered
			// scan after a seq.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: rowIndex[*persistence.CommandRecord]{
					args: fields(strArg, strArg, intArg),
					key: func(c *persistence.CommandRecord) []byte {
						return newKey(1, c.AppCode, c.RoomID).str(c.AppCode).str(c.RoomID).i64(c.Seq)
					},
				},
			},
		},
	}
}

// roomOutboxTable holds *outboxEntry rows. Every index entry is a radix
// leaf and node or two (~0.5 KB), and most rows are published for good, so
// the indexes only pending rows are looked up by leave published rows out
// (issue 13: a published row costs two entries, not five).
func roomOutboxTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableOutbox,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves the per-event reads and marks (GetOutbox,
			// MarkOutbox*, ReleaseOutbox) and the event_id uniqueness of
			// Append.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: rowIndex[*outboxEntry]{
					args: fields(strArg),
					key:  func(e *outboxEntry) []byte { return newKey(0, e.EventID).str(e.EventID) },
				},
			},
			// status serves the oldest-first scans of one status: pending
			// scan, stats, ListOutbox with a status filter, the purge's walk
			// over published rows and the notices' scan. event_id breaks
			// ties so the order is total.
			indexStatus: {
				Name:   indexStatus,
				Unique: true,
				Indexer: rowIndex[*outboxEntry]{
					args: fields(strArg, intArg, strArg),
					key: func(e *outboxEntry) []byte {
						return newKey(1, e.Status, e.EventID).str(e.Status).i64(e.CreatedAtMs).str(e.EventID)
					},
				},
			},
			// status_due serves the relay's claim: the due pending rows in
			// due order, so rows waiting for a retry are not walked. Pending
			// rows only.
			indexDue: {
				Name:         indexDue,
				Unique:       true,
				AllowMissing: true,
				Indexer: rowIndex[*outboxEntry]{
					args: fields(intArg, strArg),
					when: (*outboxEntry).pending,
					key:  func(e *outboxEntry) []byte { return newKey(1, e.EventID).i64(e.NextRetryAtMs).str(e.EventID) },
				},
			},
			// mq_status serves the MQ fanout's claim and its backlog
			// count: its pending rows oldest first. MQ-pending rows only.
			indexMQ: {
				Name:         indexMQ,
				Unique:       true,
				AllowMissing: true,
				Indexer: rowIndex[*outboxEntry]{
					args: fields(intArg, strArg),
					when: func(e *outboxEntry) bool { return e.MQStatus == persistence.OutboxMQPending },
					key:  func(e *outboxEntry) []byte { return newKey(1, e.EventID).i64(e.CreatedAtMs).str(e.EventID) },
				},
			},
			// room_seq serves the claim's per-room step: one room's
			// pending rows in room_seq order. Pending rows only.
			indexRoom: {
				Name:         indexRoom,
				Unique:       true,
				AllowMissing: true,
				Indexer: rowIndex[*outboxEntry]{
					args: fields(strArg, strArg, intArg, strArg),
					when: (*outboxEntry).pending,
					key: func(e *outboxEntry) []byte {
						return newKey(1, e.AppCode, e.RoomID, e.EventID).str(e.AppCode).str(e.RoomID).i64(e.RoomSeq).str(e.EventID)
					},
				},
			},
		},
	}
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
