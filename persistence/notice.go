package persistence

import (
	"context"
	"encoding/json"
)

// Notice delivery statuses (seed 003). A row is written delivering without a
// lease, leased by a worker's claim, and ends delivered, or retryable with
// a backoff, or failed (a dead letter) after max_retry_count retries.
// Only an operator takes a row out of failed: a requeue (back to
// retryable) or a skip (skipped: given up, never sent, no longer a dead
// letter).
const (
	NoticeDelivering = "delivering"
	NoticeRetryable  = "retryable"
	NoticeDelivered  = "delivered"
	NoticeFailed     = "failed"
	NoticeSkipped    = "skipped"
)

// NoticeStatuses lists every status, in lifecycle order.
var NoticeStatuses = []string{NoticeDelivering, NoticeRetryable, NoticeDelivered, NoticeFailed, NoticeSkipped}

// ValidNoticeStatus reports whether s is a delivery status.
func ValidNoticeStatus(s string) bool {
	for _, x := range NoticeStatuses {
		if x == s {
			return true
		}
	}
	return false
}

// Source names: the owner outbox a delivery row was read from, the first
// column of the primary key.
const (
	SourceWalletOutbox = "wallet_outbox"
	SourceRoomOutbox   = "room_outbox"
)

// ChannelIMC2C is the only channel so far: a Tencent IM C2C TIMCustomElem.
// A later push or inbox module gets its own channel, so the same fact has
// one row per channel with its own retries and dead letter.
const ChannelIMC2C = "im_c2c"

// Ingress says how a row reached the delivery table; both write the same
// primary key, so a fact read by both is delivered once.
const (
	IngressPoll = "poll" // a worker's scan of the owner outbox
	IngressMQ   = "mq"   // the message-queue fanout consumer
)

// NoticeKey is the primary key of notice_delivery_events.
type NoticeKey struct {
	SourceName    string `json:"source_name"`
	AppCode       string `json:"app_code"`
	SourceEventID string `json:"source_event_id"`
	Channel       string `json:"channel"`
}

func (k NoticeKey) String() string {
	return k.SourceName + "/" + k.AppCode + "/" + k.SourceEventID + "/" + k.Channel
}

// NoticeDelivery is one notice_delivery_events row: the delivery state of one
// source event on one channel, and the final client payload.
type NoticeDelivery struct {
	NoticeKey
	// EventType is the source event's type (WalletBalanceChanged, ...).
	EventType string `json:"event_type"`
	// UserID receives the notice.
	UserID string `json:"user_id"`
	// Ext is the TIMCustomElem Ext the client switches on: wallet_notice,
	// vip_notice, room_notice.
	Ext string `json:"ext"`
	// Payload is the exact JSON the client gets as the element's Data.
	Payload json.RawMessage `json:"payload"`
	Status  string          `json:"status"`
	// RetryCount counts failed attempts; a row is attempted at most
	// 1 + max_retry_count times before it is failed.
	RetryCount int `json:"retry_count"`
	// NextRetryAtMs is when the row may be attempted next: for a fresh
	// row the source event's time (due at once), for a retryable row its
	// backoff, for a delivering row its lease end (when another worker may
	// reclaim it). For delivered and failed rows it is the time the row
	// got there, so operators list dead letters in the order they died.
	NextRetryAtMs int64  `json:"next_retry_at_ms"`
	LockedBy      string `json:"locked_by,omitempty"`
	LockUntilMs   int64  `json:"lock_until_ms"`
	// LastError is the last failure's short, secret-free text; it is kept
	// after a later success as history.
	LastError string `json:"last_error,omitempty"`
	Ingress   string `json:"ingress"`
	// SourceCreatedAtMs is the source event's created_at_ms.
	SourceCreatedAtMs int64 `json:"source_created_at_ms"`
	CreatedAtMs       int64 `json:"created_at_ms"`
	UpdatedAtMs       int64 `json:"updated_at_ms"`
	DeliveredAtMs     int64 `json:"delivered_at_ms,omitempty"`
	// RequeueCount and RequeuedAtMs record operator requeues of a dead
	// letter.
	RequeueCount int   `json:"requeue_count"`
	RequeuedAtMs int64 `json:"requeued_at_ms,omitempty"`
}

// Clone returns a copy that shares no memory with d.
func (d NoticeDelivery) Clone() NoticeDelivery {
	if d.Payload != nil {
		d.Payload = append(json.RawMessage{}, d.Payload...)
	}
	return d
}

// NoticeFilter selects rows for operators.
type NoticeFilter struct {
	Status     string // "" = any
	SourceName string // "" = any
	Limit      int
}

// NoticeStats describes one source's open rows for metrics.
type NoticeStats struct {
	Delivering int64
	Retryable  int64
	Failed     int64 // dead letters waiting for an operator
	// OldestDueMs is the smallest next_retry_at_ms of a row that may be
	// attempted at nowMs (0 when none is due).
	OldestDueMs int64
}

// NoticeCursor is a scan position in an owner outbox: wallet_outbox uses Num
// (the id), room_outbox uses Num = created_at_ms and Key = event_id.
type NoticeCursor struct {
	Num int64  `json:"num"`
	Key string `json:"key"`
}

// Less orders cursors by (Num, Key).
func (c NoticeCursor) Less(o NoticeCursor) bool {
	if c.Num != o.Num {
		return c.Num < o.Num
	}
	return c.Key < o.Key
}

// NoticeStore is the notice delivery table and the scan cursors (hyapp_notice).
// persistence/memdb and persistence/mysql implement it;
// persistence/storetest.RunNoticeStore is the contract. Errors wrap
// ErrUnavailable (backend unreachable), ErrNotFound and
// ErrConflict as each method says.
type NoticeStore interface {
	// Ingest inserts the rows whose key does not exist yet and ignores
	// the others (the idempotency boundary: a fact read twice, by two
	// workers or by the poller and the MQ consumer, is one row). A row
	// given with Status "" is written delivering with no lease and
	// NextRetryAtMs = SourceCreatedAtMs (due at once); a row given as
	// failed (a corrupt source event) is written as it is. It returns how
	// many rows were new.
	Ingest(ctx context.Context, rows []NoticeDelivery, nowMs int64) (int, error)
	// Claim leases up to limit rows of source that may be attempted at
	// nowMs (retryable rows whose next_retry_at_ms has come, delivering
	// rows without a live lease), oldest first, to owner until
	// nowMs+leaseMs: they become delivering with locked_by = owner and
	// next_retry_at_ms = lock_until_ms. Two callers never get the same
	// row while its lease runs.
	Claim(ctx context.Context, source, owner string, nowMs, leaseMs int64, limit int) ([]NoticeDelivery, error)
	// MarkDelivered sets the rows delivered (whoever holds them: a send
	// that succeeded is a fact) and clears their leases. Rows already
	// delivered or failed, and unknown keys, are skipped.
	MarkDelivered(ctx context.Context, keys []NoticeKey, nowMs int64) error
	// MarkRetryable records a failed attempt of a row owner holds:
	// retryable, retry_count = retryCount, last_error, next_retry_at_ms,
	// lease cleared. ErrConflict when owner no longer holds the row (its
	// lease expired and another worker took it, or it was delivered).
	MarkRetryable(ctx context.Context, key NoticeKey, owner string, retryCount int, lastError string, nextRetryAtMs, nowMs int64) error
	// MarkFailed is MarkRetryable's last step: the row becomes a dead
	// letter and is never claimed again.
	MarkFailed(ctx context.Context, key NoticeKey, owner string, retryCount int, lastError string, nowMs int64) error
	// Release gives back rows owner holds but did not attempt (shutdown):
	// they stay delivering without a lease, due at nowMs.
	Release(ctx context.Context, keys []NoticeKey, owner string, nowMs int64) error
	// Requeue takes a dead letter back: failed → retryable, due at nowMs,
	// retry_count reset to 0 (a full new set of attempts), requeue_count+1
	// and requeued_at_ms recorded, last_error kept. ErrNotFound for an
	// unknown key, ErrConflict when the row is not failed.
	Requeue(ctx context.Context, key NoticeKey, nowMs int64) (NoticeDelivery, error)
	// Get returns one row, or ErrNotFound.
	Get(ctx context.Context, key NoticeKey) (NoticeDelivery, error)
	// FindBySourceEvent returns the rows of one source event id (every
	// source, app and channel), for operators who know only the id.
	FindBySourceEvent(ctx context.Context, sourceEventID string) ([]NoticeDelivery, error)
	// List returns rows for operators ordered by (status, source,
	// next_retry_at_ms).
	List(ctx context.Context, f NoticeFilter) ([]NoticeDelivery, error)
	// NoticeStats summarises source's open rows and dead letters.
	Stats(ctx context.Context, source string, nowMs int64) (NoticeStats, error)
	NoticeBulkStore

	// ClaimCursor leases source's scan cursor to owner until
	// nowMs+leaseMs (creating it at zero) and returns it with held=true,
	// or held=false when another owner's lease runs: only one worker
	// scans a source at a time.
	ClaimCursor(ctx context.Context, source, owner string, nowMs, leaseMs int64) (c NoticeCursor, held bool, err error)
	// SaveCursor stores source's cursor if owner still holds its lease
	// (otherwise it writes nothing: the new holder rescans from the
	// stored cursor, and ingest ignores what it already has).
	SaveCursor(ctx context.Context, source, owner string, c NoticeCursor, nowMs int64) error
	Close() error
}
