package memdb

import (
	"github.com/hashicorp/go-memdb"
)

// Table and index names of the notice domain, which lives in its own MemDB
// (see NoticeStore).
const (
	tableNoticeDeliveries = "notice_delivery_events"
	tableNoticeCursors    = "notice_source_cursors"

	indexNoticeDue   = "due"
	indexNoticeEvent = "source_event_id"
)

// noticeTables lists the notice domain's tables; noticeSchema assembles
// them.
var noticeTables = []func() *memdb.TableSchema{
	noticeDeliveriesTable,
	noticeCursorsTable,
}

func noticeSchema() *memdb.DBSchema {
	return newSchema(noticeTables...)
}

// noticeDeliveriesTable holds *noticeEntry rows.
func noticeDeliveriesTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableNoticeDeliveries,
		Indexes: map[string]*memdb.IndexSchema{
			// id is seed 003's primary key: the idempotency boundary of
			// Ingest, and every per-row read and mark.
			indexID: {
				Name:   indexID,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "SourceName"},
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "SourceEventID"},
					&memdb.StringFieldIndex{Field: "Channel"},
				}},
			},
			// due serves Claim (the oldest rows of one status and source
			// by next_retry_at_ms), Stats, and List by status. The key
			// columns after it make the order total.
			indexNoticeDue: {
				Name:   indexNoticeDue,
				Unique: true,
				Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
					&memdb.StringFieldIndex{Field: "Status"},
					&memdb.StringFieldIndex{Field: "SourceName"},
					&memdb.IntFieldIndex{Field: "NextRetryAtMs"},
					&memdb.StringFieldIndex{Field: "AppCode"},
					&memdb.StringFieldIndex{Field: "SourceEventID"},
					&memdb.StringFieldIndex{Field: "Channel"},
				}},
			},
			// source_event_id serves FindBySourceEvent (operators who
			// know only the event id).
			indexNoticeEvent: {
				Name:    indexNoticeEvent,
				Indexer: &memdb.StringFieldIndex{Field: "SourceEventID"},
			},
		},
	}
}

// noticeCursorsTable holds *noticeCursor rows, one per source.
func noticeCursorsTable() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableNoticeCursors,
		Indexes: map[string]*memdb.IndexSchema{
			// id serves ClaimCursor and SaveCursor.
			indexID: {
				Name:    indexID,
				Unique:  true,
				Indexer: &memdb.StringFieldIndex{Field: "SourceName"},
			},
		},
	}
}
