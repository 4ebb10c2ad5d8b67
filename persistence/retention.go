package persistence

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hyapp/roomcell/room"
)

// Tables the purge worker bounds. Every other table (the wallet
// ledger, accounts, transactions, VIP state, room snapshots, notice
// cursors) is never purged: snapshots are one row per room, replaced in
// place by a newer seq, so no superseded snapshot is ever stored.
const (
	PurgeRoomOutbox     = "room_outbox"
	PurgeCommandLog     = "room_command_log"
	PurgeWalletOutbox   = "wallet_outbox"
	PurgeNoticeDelivery = "notice_delivery_events"
)

// PurgeTables lists the purgeable tables in the order the worker visits
// them.
var PurgeTables = []string{PurgeRoomOutbox, PurgeCommandLog, PurgeWalletOutbox, PurgeNoticeDelivery}

// MaxPurgeBatch caps the rows one purge statement deletes, so a purge
// never holds row locks that room commands wait on for long.
const MaxPurgeBatch = 1000

// ConsumerPosition is how far a reader of an owner outbox has read: for
// wallet_outbox Num is the id; for room_outbox Num is created_at_ms and Key
// the event_id. Found is false when that reader has never stored a
// position: then it has passed nothing.
type ConsumerPosition struct {
	Num   int64
	Key   string
	Found bool
}

// Passed reports whether the consumer has read past (num, key).
func (p ConsumerPosition) Passed(num int64, key string) bool {
	if !p.Found {
		return false
	}
	return num < p.Num || num == p.Num && key <= p.Key
}

// PurgeRequest is one purge batch of one table.
//
// A row is eligible when it is older than CutoffMs and its table's rule
// allows it:
//   - room_outbox: status published, created_at_ms and published_at_ms
//     before CutoffMs, and not waiting for the MQ fanout (MQStatus not
//     pending); a RoomUserKicked row only when Consumer has passed it.
//     Pending (and any other status) rows never go.
//   - room_command_log: created_at_ms before CutoffMs and seq at or below
//     the room's snapshot seq (a room with no snapshot keeps its log).
//   - wallet_outbox: created_at_ms before CutoffMs and id at or below
//     Consumer.Num (the notice cursor); the newest row of the table never
//     goes, so an id is never handed out twice.
//   - notice_delivery_events: status delivered, delivered before CutoffMs.
//     Failed rows wait for an operator and never go.
type PurgeRequest struct {
	Table    string
	CutoffMs int64
	// Limit is the most rows this batch may delete (1..MaxPurgeBatch).
	Limit int
	// Consumer is the notice cursor of the table's reader (room_outbox's
	// RoomUserKicked rows, wallet_outbox); ignored by other tables.
	Consumer ConsumerPosition
	// After resumes a walk where the previous batch of the same round
	// stopped (PurgeResult.Next); "" starts at the beginning.
	After string
}

// Validate refuses a request the backends must not run.
func (r PurgeRequest) Validate() error {
	if !IsPurgeTable(r.Table) {
		return fmt.Errorf("purge: unknown table %q", r.Table)
	}
	if r.Limit < 1 || r.Limit > MaxPurgeCount {
		return fmt.Errorf("purge %s: limit %d outside 1..%d", r.Table, r.Limit, MaxPurgeBatch)
	}
	if r.CutoffMs <= 0 {
		return fmt.Errorf("purge %s: cutoff %d is not a time", r.Table, r.CutoffMs)
	}
	return nil
}

// IsPurgeTable reports whether table is one of PurgeTables.
func IsPurgeTable(table string) bool {
	for _, t := range PurgeTables {
		if t == table {
			return true
		}
	}
	return false
}

// MaxPurgeCount caps a dry run's count, which reads what it counts.
const MaxPurgeCount = 100_000

// PurgeResult is what one batch did.
type PurgeResult struct {
	// Rows deleted.
	Rows int
	// Next resumes the walk; Done is true when the walk reached its end
	// (nothing more is eligible at this cutoff).
	Next string
	Done bool
}

// TableRetention describes one table for metrics and `roomctl purge status`.
type TableRetention struct {
	Table string
	// RowEstimate is the backend's row count estimate (exact in go-memdb,
	// information_schema's estimate in MySQL).
	RowEstimate int64
	// OldestCreatedAtMs is the creation time of the oldest row still
	// stored; 0 when the table is empty.
	OldestCreatedAtMs int64
}

// PurgeLease is a held purge lease on one table; Release gives it back.
type PurgeLease interface {
	Release()
}

// Purger is implemented by every store that holds purgeable tables (the
// room store: room_outbox and room_command_log; the wallet store:
// wallet_outbox; the notice store: notice_delivery_events).
// storetest.RunRetention is the contract.
type Purger interface {
	// PurgeTables lists the tables of PurgeTables this store holds.
	PurgeTables() []string
	// Purge deletes up to r.Limit (at most MaxPurgeBatch) eligible rows by
	// primary key in one short statement and says where to resume.
	Purge(ctx context.Context, r PurgeRequest) (PurgeResult, error)
	// CountPurgeable counts the rows Purge would delete now, up to r.Limit
	// (at most MaxPurgeCount), deleting nothing: the dry run.
	CountPurgeable(ctx context.Context, r PurgeRequest) (int64, error)
	// TableRetention reports the table's size and oldest row.
	TableRetention(ctx context.Context, table string) (TableRetention, error)
	// AcquirePurgeLease takes the table's purge lease for owner, or returns
	// held=false when another owner has it. Only one node purges a table
	// at a time, so nodes do not race over the same rows. A lease lasts
	// until Release or until the holder dies (MySQL: its connection;
	// go-memdb: ttlMs).
	AcquirePurgeLease(ctx context.Context, table, owner string, nowMs, ttlMs int64) (lease PurgeLease, held bool, err error)
}

// ConsumerPositions reads the notice cursors of the owner outboxes
// (implemented by the notice stores).
type ConsumerPositions interface {
	// ConsumerPosition returns the stored cursor of the notice source
	// ("wallet_outbox" or "room_outbox"), Found=false when none is stored.
	ConsumerPosition(ctx context.Context, source string) (ConsumerPosition, error)
}

// ValidateBatch is Validate plus Purge's batch cap.
func (r PurgeRequest) ValidateBatch() error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Limit > MaxPurgeBatch {
		return fmt.Errorf("purge %s: batch of %d rows is more than %d", r.Table, r.Limit, MaxPurgeBatch)
	}
	return nil
}

// OutboxRowPurgeable is the room_outbox rule of PurgeRequest for one row,
// for backends that filter in Go.
func OutboxRowPurgeable(row OutboxRow, r PurgeRequest) bool {
	if row.Status != OutboxPublished || row.CreatedAtMs >= r.CutoffMs || row.PublishedAtMs >= r.CutoffMs ||
		row.MQStatus == OutboxMQPending {
		return false
	}
	return !room.Causes(row.Envelope.EventType, room.Notice) || r.Consumer.Passed(row.CreatedAtMs, row.Envelope.EventID)
}

// Resume tokens of the walks that may pass rows they keep: room_outbox
// walks (created_at_ms, event_id), room_command_log walks (app_code,
// room_id, seq). Both backends use these forms, so a token is a plain
// position, not a backend detail.

// OutboxToken is the room_outbox resume token after row (ms, eventID).
func OutboxToken(ms int64, eventID string) string {
	return strconv.FormatInt(ms, 10) + "/" + eventID
}

// ParseOutboxToken reads an OutboxToken; "" is the start (0, "").
func ParseOutboxToken(token string) (ms int64, eventID string, err error) {
	if token == "" {
		return 0, "", nil
	}
	num, id, _ := strings.Cut(token, "/")
	ms, err = strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("purge room_outbox: bad resume token %q", token)
	}
	return ms, id, nil
}

// LogToken is the room_command_log resume token after row (key, seq).
func LogToken(key RoomKey, seq int64) string {
	return key.AppCode + "\x00" + key.RoomID + "\x00" + strconv.FormatInt(seq, 10)
}

// ParseLogToken reads a LogToken; "" is the start (no room, seq -1).
func ParseLogToken(token string) (key RoomKey, seq int64, err error) {
	if token == "" {
		return RoomKey{}, -1, nil
	}
	parts := strings.Split(token, "\x00")
	seq, err = strconv.ParseInt(parts[len(parts)-1], 10, 64)
	if len(parts) != 3 || err != nil {
		return RoomKey{}, 0, fmt.Errorf("purge room_command_log: bad resume token")
	}
	return RoomKey{AppCode: parts[0], RoomID: parts[1]}, seq, nil
}
