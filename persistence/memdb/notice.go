package memdb

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/hashicorp/go-memdb"

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

var _ persistence.NoticeStore = (*NoticeStore)(nil)

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
	Row           persistence.NoticeDelivery
}

func newNoticeEntry(d persistence.NoticeDelivery) *noticeEntry {
	return &noticeEntry{
		SourceName: d.SourceName, AppCode: d.AppCode, SourceEventID: d.SourceEventID, Channel: d.Channel,
		Status: d.Status, NextRetryAtMs: d.NextRetryAtMs, Row: d.Clone(),
	}
}

type noticeCursor struct {
	SourceName  string
	Cursor      persistence.NoticeCursor
	LockedBy    string
	LockUntilMs int64
	UpdatedAtMs int64
}

func checkNoticeKey(k persistence.NoticeKey) error {
	if k.SourceName == "" || k.AppCode == "" || k.SourceEventID == "" || k.Channel == "" {
		return fmt.Errorf("memdb: notice key %q needs source_name, app_code, source_event_id and channel", k.String())
	}
	return nil
}

func getNotice(txn *memdb.Txn, k persistence.NoticeKey) (*noticeEntry, error) {
	raw, err := txn.First(tableNoticeDeliveries, indexID, k.SourceName, k.AppCode, k.SourceEventID, k.Channel)
	if err != nil {
		return nil, fmt.Errorf("memdb: read notice %s: %w", k, err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*noticeEntry), nil
}

// Ingest implements persistence.NoticeStore.
func (s *NoticeStore) Ingest(ctx context.Context, rows []persistence.NoticeDelivery, nowMs int64) (int, error) {
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	for _, d := range rows {
		if err := checkNoticeKey(d.NoticeKey); err != nil {
			return 0, err
		}
		if d.Status != "" && d.Status != persistence.NoticeFailed {
			return 0, fmt.Errorf("memdb: ingest %s: status %q (want empty or failed)", d.NoticeKey, d.Status)
		}
		if !json.Valid(d.Payload) {
			return 0, fmt.Errorf("memdb: ingest %s: payload is not JSON", d.NoticeKey)
		}
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	n := 0
	for _, d := range rows {
		old, err := getNotice(txn, d.NoticeKey)
		if err != nil {
			return 0, err
		}
		if old != nil {
			continue
		}
		if d.Status == "" {
			d.Status = persistence.NoticeDelivering
			d.NextRetryAtMs = d.SourceCreatedAtMs
		} else {
			d.NextRetryAtMs = nowMs
		}
		d.LockedBy, d.LockUntilMs = "", 0
		d.CreatedAtMs, d.UpdatedAtMs = nowMs, nowMs
		if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
			return 0, fmt.Errorf("memdb: ingest %s: %w", d.NoticeKey, err)
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

// Claim implements persistence.NoticeStore.
func (s *NoticeStore) Claim(ctx context.Context, source, owner string, nowMs, leaseMs int64, limit int) ([]persistence.NoticeDelivery, error) {
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
	for _, status := range []string{persistence.NoticeRetryable, persistence.NoticeDelivering} {
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
	out := make([]persistence.NoticeDelivery, 0, len(due))
	for _, e := range due {
		d := e.Row.Clone()
		d.Status = persistence.NoticeDelivering
		d.LockedBy, d.LockUntilMs, d.NextRetryAtMs = owner, until, until
		d.UpdatedAtMs = nowMs
		if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
			return nil, fmt.Errorf("memdb: claim %s: %w", d.NoticeKey, err)
		}
		out = append(out, d)
	}
	txn.Commit()
	return out, nil
}

// update applies change to a copy of one row in a write transaction;
// change returns false to leave it alone, or an error to abort.
func (s *NoticeStore) update(ctx context.Context, op string, k persistence.NoticeKey, change func(*persistence.NoticeDelivery) (bool, error)) (persistence.NoticeDelivery, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.NoticeDelivery{}, err
	}
	if err := checkNoticeKey(k); err != nil {
		return persistence.NoticeDelivery{}, err
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	e, err := getNotice(txn, k)
	if err != nil {
		return persistence.NoticeDelivery{}, err
	}
	if e == nil {
		return persistence.NoticeDelivery{}, fmt.Errorf("memdb: %s: notice %s: %w", op, k, persistence.ErrNotFound)
	}
	d := e.Row.Clone()
	ok, err := change(&d)
	if err != nil || !ok {
		return e.Row.Clone(), err
	}
	if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
		return persistence.NoticeDelivery{}, fmt.Errorf("memdb: %s %s: %w", op, k, err)
	}
	txn.Commit()
	return d.Clone(), nil
}

// MarkDelivered implements persistence.NoticeStore.
func (s *NoticeStore) MarkDelivered(ctx context.Context, keys []persistence.NoticeKey, nowMs int64) error {
	return s.updateEach(ctx, "mark delivered", keys, func(d *persistence.NoticeDelivery) bool {
		if d.Status != persistence.NoticeDelivering && d.Status != persistence.NoticeRetryable {
			return false
		}
		d.Status = persistence.NoticeDelivered
		d.LockedBy, d.LockUntilMs = "", 0
		d.NextRetryAtMs, d.DeliveredAtMs, d.UpdatedAtMs = nowMs, nowMs, nowMs
		return true
	})
}

// updateEach applies change to the row of each key in one transaction;
// malformed and unknown keys, and rows change leaves alone (it returns
// false), are skipped.
func (s *NoticeStore) updateEach(ctx context.Context, op string, keys []persistence.NoticeKey, change func(d *persistence.NoticeDelivery) bool) error {
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
		if e == nil {
			continue
		}
		d := e.Row.Clone()
		if !change(&d) {
			continue
		}
		if err := txn.Insert(tableNoticeDeliveries, newNoticeEntry(d)); err != nil {
			return fmt.Errorf("memdb: %s %s: %w", op, k, err)
		}
	}
	txn.Commit()
	return nil
}

func (s *NoticeStore) markFailure(ctx context.Context, op string, k persistence.NoticeKey, owner, status string, retryCount int, lastError string, nextMs, nowMs int64) error {
	_, err := s.update(ctx, op, k, func(d *persistence.NoticeDelivery) (bool, error) {
		if d.Status != persistence.NoticeDelivering || d.LockedBy != owner || owner == "" {
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

// MarkRetryable implements persistence.NoticeStore.
func (s *NoticeStore) MarkRetryable(ctx context.Context, k persistence.NoticeKey, owner string, retryCount int, lastError string, nextRetryAtMs, nowMs int64) error {
	return s.markFailure(ctx, "mark retryable", k, owner, persistence.NoticeRetryable, retryCount, lastError, nextRetryAtMs, nowMs)
}

// MarkFailed implements persistence.NoticeStore.
func (s *NoticeStore) MarkFailed(ctx context.Context, k persistence.NoticeKey, owner string, retryCount int, lastError string, nowMs int64) error {
	return s.markFailure(ctx, "mark failed", k, owner, persistence.NoticeFailed, retryCount, lastError, nowMs, nowMs)
}

// Release implements persistence.NoticeStore.
func (s *NoticeStore) Release(ctx context.Context, keys []persistence.NoticeKey, owner string, nowMs int64) error {
	return s.updateEach(ctx, "release", keys, func(d *persistence.NoticeDelivery) bool {
		if d.Status != persistence.NoticeDelivering || d.LockedBy != owner {
			return false
		}
		d.LockedBy, d.LockUntilMs = "", 0
		d.NextRetryAtMs, d.UpdatedAtMs = nowMs, nowMs
		return true
	})
}

// Requeue implements persistence.NoticeStore.
func (s *NoticeStore) Requeue(ctx context.Context, k persistence.NoticeKey, nowMs int64) (persistence.NoticeDelivery, error) {
	return s.update(ctx, "requeue", k, func(d *persistence.NoticeDelivery) (bool, error) {
		if d.Status != persistence.NoticeFailed {
			return false, fmt.Errorf("memdb: requeue: notice %s is %s, not failed: %w", k, d.Status, persistence.ErrConflict)
		}
		d.Status = persistence.NoticeRetryable
		d.RetryCount = 0
		d.NextRetryAtMs, d.UpdatedAtMs = nowMs, nowMs
		d.RequeueCount++
		d.RequeuedAtMs = nowMs
		return true, nil
	})
}

// Get implements persistence.NoticeStore.
func (s *NoticeStore) Get(ctx context.Context, k persistence.NoticeKey) (persistence.NoticeDelivery, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.NoticeDelivery{}, err
	}
	if checkNoticeKey(k) != nil {
		return persistence.NoticeDelivery{}, fmt.Errorf("memdb: notice %s: %w", k, persistence.ErrNotFound)
	}
	e, err := getNotice(s.db.Txn(false), k)
	if err != nil {
		return persistence.NoticeDelivery{}, err
	}
	if e == nil {
		return persistence.NoticeDelivery{}, fmt.Errorf("memdb: notice %s: %w", k, persistence.ErrNotFound)
	}
	return e.Row.Clone(), nil
}

// FindBySourceEvent implements persistence.NoticeStore.
func (s *NoticeStore) FindBySourceEvent(ctx context.Context, sourceEventID string) ([]persistence.NoticeDelivery, error) {
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
	var out []persistence.NoticeDelivery
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*noticeEntry).Row.Clone())
	}
	return out, nil
}

// List implements persistence.NoticeStore. limit <= 0 returns nothing: a list is
// always bounded.
func (s *NoticeStore) List(ctx context.Context, f persistence.NoticeFilter) ([]persistence.NoticeDelivery, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if f.Limit <= 0 {
		return nil, nil
	}
	statuses := []string{f.Status}
	if f.Status == "" {
		statuses = []string{persistence.NoticeDelivered, persistence.NoticeDelivering, persistence.NoticeFailed, persistence.NoticeRetryable, persistence.NoticeSkipped}
	}
	txn := s.db.Txn(false)
	var out []persistence.NoticeDelivery
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

// Stats implements persistence.NoticeStore.
func (s *NoticeStore) Stats(ctx context.Context, source string, nowMs int64) (persistence.NoticeStats, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.NoticeStats{}, err
	}
	var st persistence.NoticeStats
	if source == "" {
		return st, nil
	}
	txn := s.db.Txn(false)
	oldest := int64(math.MaxInt64)
	for _, status := range []string{persistence.NoticeDelivering, persistence.NoticeRetryable, persistence.NoticeFailed} {
		err := scanNotices(txn, status, source, func(e *noticeEntry) bool {
			switch status {
			case persistence.NoticeDelivering:
				st.Delivering++
			case persistence.NoticeRetryable:
				st.Retryable++
			case persistence.NoticeFailed:
				st.Failed++
			}
			if status != persistence.NoticeFailed && e.NextRetryAtMs <= nowMs && e.NextRetryAtMs < oldest {
				oldest = e.NextRetryAtMs
			}
			return true
		})
		if err != nil {
			return persistence.NoticeStats{}, fmt.Errorf("memdb: notice stats: %w", err)
		}
	}
	if oldest != math.MaxInt64 {
		st.OldestDueMs = oldest
	}
	return st, nil
}

// ClaimCursor implements persistence.NoticeStore.
func (s *NoticeStore) ClaimCursor(ctx context.Context, source, owner string, nowMs, leaseMs int64) (persistence.NoticeCursor, bool, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.NoticeCursor{}, false, err
	}
	if source == "" || owner == "" {
		return persistence.NoticeCursor{}, false, fmt.Errorf("memdb: claim cursor needs a source and an owner")
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	raw, err := txn.First(tableNoticeCursors, indexID, source)
	if err != nil {
		return persistence.NoticeCursor{}, false, fmt.Errorf("memdb: read cursor %s: %w", source, err)
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
		return persistence.NoticeCursor{}, false, fmt.Errorf("memdb: claim cursor %s: %w", source, err)
	}
	txn.Commit()
	return c.Cursor, true, nil
}

// SaveCursor implements persistence.NoticeStore.
func (s *NoticeStore) SaveCursor(ctx context.Context, source, owner string, cur persistence.NoticeCursor, nowMs int64) error {
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
