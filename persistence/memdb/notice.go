package memdb

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/persistence"
)

// NoticeStore is the go-memdb notice store (dev mode, fast tests):
// notice_delivery_events and notice_source_cursors in a MemDB of their
// own. go-memdb admits one writer at a time, so a claim's scan and lease
// writes are one atomic step and two owners can never both take a row. The
// zero value is not usable; call NewNoticeStore.
type NoticeStore struct {
	db     *memdb.MemDB
	closed atomic.Bool
	leases purgeLeases // purge.go
}

var _ notice.Store = (*NoticeStore)(nil)

// NewNoticeStore returns an empty notice store.
func NewNoticeStore() *NoticeStore {
	db, err := memdb.NewMemDB(noticeSchema())
	if err != nil {
		// The schema is a constant of this package: failing is a bug.
		panic(fmt.Sprintf("memdb: notice schema: %v", err))
	}
	return &NoticeStore{db: db}
}

// Close makes every later call fail with ErrUnavailable, as a closed MySQL
// pool would.
func (s *NoticeStore) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *NoticeStore) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("memdb: notice store closed: %w", persistence.ErrUnavailable)
	}
	return nil
}

// noticeEntry is the stored form of a delivery row; the index fields are
// copies of Row's, set only by newNoticeEntry so they cannot drift.
type noticeEntry struct {
	SourceName    string
	AppCode       string
	SourceEventID string
	Channel       string
	Status        string
	NextRetryAtMs int64
	Row           notice.Delivery
}

func newNoticeEntry(d notice.Delivery) *noticeEntry {
	return &noticeEntry{
		SourceName: d.SourceName, AppCode: d.AppCode, SourceEventID: d.SourceEventID, Channel: d.Channel,
		Status: d.Status, NextRetryAtMs: d.NextRetryAtMs, Row: d.Clone(),
	}
}

type noticeCursor struct {
	SourceName  string
	Cursor      notice.Cursor
	LockedBy    string
	LockUntilMs int64
	UpdatedAtMs int64
}

func checkNoticeKey(k notice.Key) error {
	if k.SourceName == "" || k.AppCode == "" || k.SourceEventID == "" || k.Channel == "" {
		return fmt.Errorf("memdb: notice key %q needs source_name, app_code, source_event_id and channel", k.String())
	}
	return nil
}

func getNotice(txn *memdb.Txn, k notice.Key) (*noticeEntry, error) {
	raw, err := txn.First(tableNoticeDeliveries, indexID, k.SourceName, k.AppCode, k.SourceEventID, k.Channel)
	if err != nil {
		return nil, fmt.Errorf("memdb: read notice %s: %w", k, err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*noticeEntry), nil
}

// Ingest implements notice.Store.
func (s *NoticeStore) Ingest(ctx context.Context, rows []notice.Delivery, nowMs int64) (int, error) {
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	for _, d := range rows {
		if err := checkNoticeKey(d.Key); err != nil {
			return 0, err
		}
		if d.Status != "" && d.Status != notice.StatusFailed {
			return 0, fmt.Errorf("memdb: ingest %s: status %q (want empty or failed)", d.Key, d.Status)
		}
		if !json.Valid(d.Payload) {
			return 0, fmt.Errorf("memdb: ingest %s: payload is not JSON", d.Key)
		}
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	n := 0
	for _, d := range rows {
		old, err := getNotice(txn, d.Key)
		if err != nil {
			return 0, err
		}
		if old != nil {
			continue
		}
		if d.Status == "" {
			d.Status = notice.StatusDelivering
			d.NextRetryAtMs = d.SourceCreatedAtMs
		} else {
			d.NextRetryAtMs = nowMs
		}
		d.LockedBy, d.LockUntilMs = "", 0
		d.CreatedAtMs, d.UpdatedAtMs = nowMs, nowMs
		if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
			return 0, fmt.Errorf("memdb: ingest %s: %w", d.Key, err)
		}
		n++
	}
	txn.Commit()
	return n, nil
}

// scanNotices calls fn with the rows of one status (and source, if not
// "") in index order until fn returns false.
func scanNotices(txn *memdb.Txn, status, source string, fn func(*noticeEntry) bool) error {
	args := []any{status}
	if source != "" {
		args = append(args, source)
	}
	it, err := txn.Get(tableNoticeDeliveries, indexNoticeDue+"_prefix", args...)
	if err != nil {
		return err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if !fn(raw.(*noticeEntry)) {
			return nil
		}
	}
	return nil
}

// Claim implements notice.Store.
func (s *NoticeStore) Claim(ctx context.Context, source, owner string, nowMs, leaseMs int64, limit int) ([]notice.Delivery, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 || source == "" {
		return nil, nil
	}
	if owner == "" {
		return nil, fmt.Errorf("memdb: claim notices: empty owner")
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	// Collect first: go-memdb iterators must not run across writes to the
	// index they walk.
	var due []*noticeEntry
	for _, status := range []string{notice.StatusRetryable, notice.StatusDelivering} {
		err := scanNotices(txn, status, source, func(e *noticeEntry) bool {
			if len(due) >= limit || e.NextRetryAtMs > nowMs {
				return false
			}
			if e.Row.LockUntilMs <= nowMs {
				due = append(due, e)
			}
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("memdb: claim notices: %w", err)
		}
	}
	until := nowMs + leaseMs
	out := make([]notice.Delivery, 0, len(due))
	for _, e := range due {
		d := e.Row.Clone()
		d.Status = notice.StatusDelivering
		d.LockedBy, d.LockUntilMs, d.NextRetryAtMs = owner, until, until
		d.UpdatedAtMs = nowMs
		if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
			return nil, fmt.Errorf("memdb: claim %s: %w", d.Key, err)
		}
		out = append(out, d)
	}
	txn.Commit()
	return out, nil
}

// update applies change to a copy of one row in a write transaction;
// change returns false to leave it alone, or an error to abort.
func (s *NoticeStore) update(ctx context.Context, op string, k notice.Key, change func(*notice.Delivery) (bool, error)) (notice.Delivery, error) {
	if err := s.ready(ctx); err != nil {
		return notice.Delivery{}, err
	}
	if err := checkNoticeKey(k); err != nil {
		return notice.Delivery{}, err
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	e, err := getNotice(txn, k)
	if err != nil {
		return notice.Delivery{}, err
	}
	if e == nil {
		return notice.Delivery{}, fmt.Errorf("memdb: %s: notice %s: %w", op, k, persistence.ErrNotFound)
	}
	d := e.Row.Clone()
	ok, err := change(&d)
	if err != nil || !ok {
		return e.Row.Clone(), err
	}
	if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
		return notice.Delivery{}, fmt.Errorf("memdb: %s %s: %w", op, k, err)
	}
	txn.Commit()
	return d.Clone(), nil
}

// MarkDelivered implements notice.Store.
func (s *NoticeStore) MarkDelivered(ctx context.Context, keys []notice.Key, nowMs int64) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	for _, k := range keys {
		if checkNoticeKey(k) != nil {
			continue
		}
		e, err := getNotice(txn, k)
		if err != nil {
			return err
		}
		if e == nil || (e.Status != notice.StatusDelivering && e.Status != notice.StatusRetryable) {
			continue
		}
		d := e.Row.Clone()
		d.Status = notice.StatusDelivered
		d.LockedBy, d.LockUntilMs = "", 0
		d.NextRetryAtMs, d.DeliveredAtMs, d.UpdatedAtMs = nowMs, nowMs, nowMs
		if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
			return fmt.Errorf("memdb: mark delivered %s: %w", k, err)
		}
	}
	txn.Commit()
	return nil
}

func (s *NoticeStore) markFailure(ctx context.Context, op string, k notice.Key, owner, status string, retryCount int, lastError string, nextMs, nowMs int64) error {
	_, err := s.update(ctx, op, k, func(d *notice.Delivery) (bool, error) {
		if d.Status != notice.StatusDelivering || d.LockedBy != owner || owner == "" {
			return false, fmt.Errorf("memdb: %s: notice %s is %s held by %q, not by %q: %w",
				op, k, d.Status, d.LockedBy, owner, persistence.ErrConflict)
		}
		d.Status = status
		d.RetryCount = retryCount
		d.LastError = lastError
		d.LockedBy, d.LockUntilMs = "", 0
		d.NextRetryAtMs, d.UpdatedAtMs = nextMs, nowMs
		return true, nil
	})
	return err
}

// MarkRetryable implements notice.Store.
func (s *NoticeStore) MarkRetryable(ctx context.Context, k notice.Key, owner string, retryCount int, lastError string, nextRetryAtMs, nowMs int64) error {
	return s.markFailure(ctx, "mark retryable", k, owner, notice.StatusRetryable, retryCount, lastError, nextRetryAtMs, nowMs)
}

// MarkFailed implements notice.Store.
func (s *NoticeStore) MarkFailed(ctx context.Context, k notice.Key, owner string, retryCount int, lastError string, nowMs int64) error {
	return s.markFailure(ctx, "mark failed", k, owner, notice.StatusFailed, retryCount, lastError, nowMs, nowMs)
}

// Release implements notice.Store.
func (s *NoticeStore) Release(ctx context.Context, keys []notice.Key, owner string, nowMs int64) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	for _, k := range keys {
		if checkNoticeKey(k) != nil {
			continue
		}
		e, err := getNotice(txn, k)
		if err != nil {
			return err
		}
		if e == nil || e.Status != notice.StatusDelivering || e.Row.LockedBy != owner {
			continue
		}
		d := e.Row.Clone()
		d.LockedBy, d.LockUntilMs = "", 0
		d.NextRetryAtMs, d.UpdatedAtMs = nowMs, nowMs
		if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
			return fmt.Errorf("memdb: release %s: %w", k, err)
		}
	}
	txn.Commit()
	return nil
}

// Requeue implements notice.Store.
func (s *NoticeStore) Requeue(ctx context.Context, k notice.Key, nowMs int64) (notice.Delivery, error) {
	return s.update(ctx, "requeue", k, func(d *notice.Delivery) (bool, error) {
		if d.Status != notice.StatusFailed {
			return false, fmt.Errorf("memdb: requeue: notice %s is %s, not failed: %w", k, d.Status, persistence.ErrConflict)
		}
		d.Status = notice.StatusRetryable
		d.RetryCount = 0
		d.NextRetryAtMs, d.UpdatedAtMs = nowMs, nowMs
		d.RequeueCount++
		d.RequeuedAtMs = nowMs
		return true, nil
	})
}

// Get implements notice.Store.
func (s *NoticeStore) Get(ctx context.Context, k notice.Key) (notice.Delivery, error) {
	if err := s.ready(ctx); err != nil {
		return notice.Delivery{}, err
	}
	if checkNoticeKey(k) != nil {
		return notice.Delivery{}, fmt.Errorf("memdb: notice %s: %w", k, persistence.ErrNotFound)
	}
	e, err := getNotice(s.db.Txn(false), k)
	if err != nil {
		return notice.Delivery{}, err
	}
	if e == nil {
		return notice.Delivery{}, fmt.Errorf("memdb: notice %s: %w", k, persistence.ErrNotFound)
	}
	return e.Row.Clone(), nil
}

// FindBySourceEvent implements notice.Store.
func (s *NoticeStore) FindBySourceEvent(ctx context.Context, sourceEventID string) ([]notice.Delivery, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if sourceEventID == "" {
		return nil, nil
	}
	it, err := s.db.Txn(false).Get(tableNoticeDeliveries, indexNoticeEvent, sourceEventID)
	if err != nil {
		return nil, fmt.Errorf("memdb: find notice: %w", err)
	}
	var out []notice.Delivery
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*noticeEntry).Row.Clone())
	}
	return out, nil
}

// List implements notice.Store. limit <= 0 returns nothing: a list is
// always bounded.
func (s *NoticeStore) List(ctx context.Context, f notice.Filter) ([]notice.Delivery, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if f.Limit <= 0 {
		return nil, nil
	}
	statuses := []string{f.Status}
	if f.Status == "" {
		statuses = []string{notice.StatusDelivered, notice.StatusDelivering, notice.StatusFailed, notice.StatusRetryable}
	}
	txn := s.db.Txn(false)
	var out []notice.Delivery
	for _, st := range statuses {
		err := scanNotices(txn, st, f.SourceName, func(e *noticeEntry) bool {
			if len(out) >= f.Limit {
				return false
			}
			out = append(out, e.Row.Clone())
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("memdb: list notices: %w", err)
		}
	}
	return out, nil
}

// Stats implements notice.Store.
func (s *NoticeStore) Stats(ctx context.Context, source string, nowMs int64) (notice.Stats, error) {
	if err := s.ready(ctx); err != nil {
		return notice.Stats{}, err
	}
	var st notice.Stats
	if source == "" {
		return st, nil
	}
	txn := s.db.Txn(false)
	oldest := int64(math.MaxInt64)
	for _, status := range []string{notice.StatusDelivering, notice.StatusRetryable, notice.StatusFailed} {
		err := scanNotices(txn, status, source, func(e *noticeEntry) bool {
			switch status {
			case notice.StatusDelivering:
				st.Delivering++
			case notice.StatusRetryable:
				st.Retryable++
			case notice.StatusFailed:
				st.Failed++
			}
			if status != notice.StatusFailed && e.NextRetryAtMs <= nowMs && e.NextRetryAtMs < oldest {
				oldest = e.NextRetryAtMs
			}
			return true
		})
		if err != nil {
			return notice.Stats{}, fmt.Errorf("memdb: notice stats: %w", err)
		}
	}
	if oldest != math.MaxInt64 {
		st.OldestDueMs = oldest
	}
	return st, nil
}

// ClaimCursor implements notice.Store.
func (s *NoticeStore) ClaimCursor(ctx context.Context, source, owner string, nowMs, leaseMs int64) (notice.Cursor, bool, error) {
	if err := s.ready(ctx); err != nil {
		return notice.Cursor{}, false, err
	}
	if source == "" || owner == "" {
		return notice.Cursor{}, false, fmt.Errorf("memdb: claim cursor needs a source and an owner")
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	raw, err := txn.First(tableNoticeCursors, indexID, source)
	if err != nil {
		return notice.Cursor{}, false, fmt.Errorf("memdb: read cursor %s: %w", source, err)
	}
	c := noticeCursor{SourceName: source, UpdatedAtMs: nowMs}
	if raw != nil {
		c = *raw.(*noticeCursor)
	}
	if c.LockedBy != "" && c.LockedBy != owner && c.LockUntilMs > nowMs {
		return c.Cursor, false, nil
	}
	c.LockedBy, c.LockUntilMs = owner, nowMs+leaseMs
	if err := txn.Insert(tableNoticeCursors, &c); err != nil {
		return notice.Cursor{}, false, fmt.Errorf("memdb: claim cursor %s: %w", source, err)
	}
	txn.Commit()
	return c.Cursor, true, nil
}

// SaveCursor implements notice.Store.
func (s *NoticeStore) SaveCursor(ctx context.Context, source, owner string, cur notice.Cursor, nowMs int64) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	raw, err := txn.First(tableNoticeCursors, indexID, source)
	if err != nil {
		return fmt.Errorf("memdb: read cursor %s: %w", source, err)
	}
	if raw == nil || raw.(*noticeCursor).LockedBy != owner || owner == "" {
		return nil
	}
	c := *raw.(*noticeCursor)
	c.Cursor, c.UpdatedAtMs = cur, nowMs
	if err := txn.Insert(tableNoticeCursors, &c); err != nil {
		return fmt.Errorf("memdb: save cursor %s: %w", source, err)
	}
	txn.Commit()
	return nil
}
