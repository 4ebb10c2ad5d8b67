package notice

import (
	"context"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
)

// Error classes of the notice code (store errors use persistence's).
var (
	// ErrCorruptSource: an owner outbox row that can never become a
	// notice (payload does not decode, recipient missing). It is recorded
	// as a failed row so operators see it, and never retried.
	ErrCorruptSource = errclass.Define(errclass.Invalid, "notice: corrupt source event")
)

// Publisher sends one private notice: delivery/roomim.Publisher.SendNotice
// (a C2C TIMCustomElem with ext as Ext, data as Data, the event id in
// CloudCustomData; it imports the receiver's IM account itself). It must
// honour ctx's deadline.
type Publisher interface {
	SendNotice(ctx context.Context, appCode, toUserID, ext string, data []byte, eventID string) error
}

// ScanResult is what one scan of an owner outbox produced.
type ScanResult struct {
	// Deliveries are the notices of the source events read (possibly
	// already ingested: Ingest ignores those).
	Deliveries []persistence.NoticeDelivery
	// Safe is the cursor to persist: every source event at or before it
	// has been handed out, including ones that committed late.
	Safe persistence.NoticeCursor
	// More is true when the scan stopped at its limit: scan again at once.
	More bool
}

// Scanner reads new facts of one owner outbox and maps them to
// deliveries. It keeps an in-memory position ahead of the persisted one
// (Safe) so that late commits behind it are caught; Reset throws that
// state away. A Scanner is used by one worker at a time.
type Scanner interface {
	// Reset restarts the scanner at a persisted cursor.
	Reset(from persistence.NoticeCursor)
	// Scan reads up to limit new source events.
	Scan(ctx context.Context, nowMs int64, limit int) (ScanResult, error)
}

// Module is one notice type family (walletnotice, roomnotice): which
// source its rows carry and how to scan that source.
type Module struct {
	// Name is the worker's name: the actor name, the log `worker` field
	// and the metrics label (wallet_notice_worker, room_notice_worker).
	Name string
	// Source is the source_name of its rows.
	Source string
	// Scanner reads the owner outbox; nil when this process only delivers
	// (rows come from the MQ consumer).
	Scanner Scanner
}
