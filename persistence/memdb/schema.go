package memdb

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
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
	indexDue       = "status_due"
	indexRoom      = "room_status_seq"
	indexMQ        = "mq_status"
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

// roomCommandLogTable holds *persistence.CommandRecord rows.
func roomCommandLogTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableCommandLog,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves the seq fence of Append and LoadCommands' ordered
			// scan after a seq.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "RoomID"},
					&memdb.IntFieldIndex{Field: "Seq"},
				}},
			},
			// command_id serves the command_id fence of Append and
			// FindCommand (duplicate command replay).
			indexCommandID: {
				Name:   indexCommandID,
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

// roomOutboxTable holds *outboxEntry rows.
func roomOutboxTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableOutbox,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves the per-event reads and marks (GetOutbox,
			// MarkOutbox*, ReleaseOutbox) and the event_id uniqueness of
			// Append.
			indexID: {
				Name:    indexID,
				Unique:  true,
				Indexer: &memdb.StringFieldIndex{Field: "EventID"},
			},
			// status serves the oldest-first scans of one status: pending
			// scan, claim, stats and ListOutbox with a status filter.
			// event_id breaks ties so the order is total.
			indexStatus: {
				Name:   indexStatus,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "Status"},
					&memdb.IntFieldIndex{Field: "CreatedAtMs"},
					&memdb.StringFieldIndex{Field: "EventID"},
				}},
			},
			// status_due serves the relay's claim: the due pending rows in
			// due order, so rows waiting for a retry are not walked.
			indexDue: {
				Name:   indexDue,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "Status"},
					&memdb.IntFieldIndex{Field: "NextRetryAtMs"},
					&memdb.StringFieldIndex{Field: "EventID"},
				}},
			},
			// mq_status serves the MQ fanout's claim and its backlog
			// count: its pending rows oldest first.
			indexMQ: {
				Name:   indexMQ,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "MQStatus"},
					&memdb.IntFieldIndex{Field: "CreatedAtMs"},
					&memdb.StringFieldIndex{Field: "EventID"},
				}},
			},
			// room_status_seq serves the claim's per-room step: one room's
			// pending rows in room_seq order.
			indexRoom: {
				Name:   indexRoom,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "RoomID"},
					&memdb.StringFieldIndex{Field: "Status"},
					&memdb.IntFieldIndex{Field: "RoomSeq"},
					&memdb.StringFieldIndex{Field: "EventID"},
				}},
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
