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
	return table(tableNoticeDeliveries,
		// id is seed 003's primary key: the idempotency boundary of
		// Ingest, and every per-row read and mark.
		index(indexID, true, strField("SourceName"), strField("AppCode"), strField("SourceEventID"), strField("Channel")),
		// due serves Claim (the oldest rows of one status and source
		// by next_retry_at_ms), Stats, and List by status. The key
		// columns after it make the order total.
		index(indexNoticeDue, true, strField("Status"), strField("SourceName"), intField("NextRetryAtMs"),
			strField("AppCode"), strField("SourceEventID"), strField("Channel")),
		// source_event_id serves FindBySourceEvent (operators who
		// know only the event id).
		index(indexNoticeEvent, false, strField("SourceEventID")))
}

// noticeCursorsTable holds *noticeCursor rows, one per source.
func noticeCursorsTable() *memdb.TableSchema {
	return table(tableNoticeCursors,
		// id serves ClaimCursor and SaveCursor.
		index(indexID, true, strField("SourceName")))
}
