package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// NoticeSchema is the name of the notice store's embedded schema
// (schema/notice/*.sql).
const NoticeSchema = "notice"

// Column bounds of notice_delivery_events.
const (
	maxNoticeSource  = 64
	maxNoticeChannel = 32
	maxNoticeUser    = 64
	maxNoticeExt     = 32
	maxNoticeIngress = 16
)

// noticeMaxAttempts bounds the retries of a write InnoDB chose as a
// deadlock victim (an ingest meeting a mark on the same rows).
const noticeMaxAttempts = 5

// NoticeStore is the MySQL notice store in cfg.NoticeDatabase
// (notice_delivery_events, notice_source_cursors). It also reads the owner
// outboxes by qualified name, `<wallet_database>`.wallet_outbox and
// `<room_database>`.room_outbox, on the same server (WalletOutbox,
// RoomOutbox): the seed's notice-service has one connection and the owner
// databases' names in its config. It never writes them. Claims lock rows
// with FOR UPDATE SKIP LOCKED (MySQL 8, MariaDB 10.6+), so instances on
// any number of processes never hold one row at once. Safe for concurrent
// use.
type NoticeStore struct {
	pool
	walletDB string
	roomDB   string
}

var _ persistence.NoticeStore = (*NoticeStore)(nil)

// OpenNoticeStore connects to cfg's server, applies the notice schema to
// cfg.NoticeDatabase when cfg.AutoMigrate is set, and returns the store.
// The owner outboxes are read from cfg.WalletDatabase and cfg.RoomDatabase
// (their schemas belong to the wallet and room stores). No error or log
// line carries the password.
func OpenNoticeStore(ctx context.Context, cfg configs.MySQLConfig, opts ...Option) (*NoticeStore, error) {
	o := options{log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	cfg = withDefaults(cfg)
	for _, d := range []string{cfg.WalletDatabase, cfg.RoomDatabase} {
		if err := checkIdent(d, false); err != nil {
			return nil, err
		}
	}
	if cfg.AutoMigrate {
		if err := migrateConfig(ctx, cfg, NoticeSchema, cfg.NoticeDatabase, o.log); err != nil {
			return nil, err
		}
	}
	db, err := openDB(ctx, cfg, cfg.NoticeDatabase, cfg.QueryTimeout, o.log)
	if err != nil {
		return nil, err
	}
	if !cfg.AutoMigrate {
		if err := refuseAhead(ctx, db, NoticeSchema, cfg.NoticeDatabase, o.log); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	s := NewNoticeStore(db, cfg.QueryTimeout, cfg.WalletDatabase, cfg.RoomDatabase, o.log)
	s.dsn, s.ownDB = cfg.DSN, true
	s.log.Info("notice store open", "dsn", redactedDSN(cfg.DSN, cfg.NoticeDatabase),
		"wallet_database", cfg.WalletDatabase, "room_database", cfg.RoomDatabase)
	return s, nil
}

// NewNoticeStore wraps an open pool whose default database holds the
// notice schema (tests: mysqltest). walletDatabase and roomDatabase name
// the owner databases (checked identifiers; "" falls back to the
// configs' defaults). Close does not close db.
func NewNoticeStore(db *sql.DB, queryTimeout time.Duration, walletDatabase, roomDatabase string, log *slog.Logger) *NoticeStore {
	if checkIdent(walletDatabase, false) != nil {
		walletDatabase = "hyapp_wallet"
	}
	if checkIdent(roomDatabase, false) != nil {
		roomDatabase = "hyapp_room"
	}
	return &NoticeStore{pool: newStorePool(db, queryTimeout, log, "notice"), walletDB: walletDatabase, roomDB: roomDatabase}
}

var errNoticeClosed = fmt.Errorf("mysql: notice store closed: %w", persistence.ErrUnavailable)

func (s *NoticeStore) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, errNoticeClosed
	}
	if err := ready(ctx); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

func (s *NoticeStore) wrap(op string, err error) error {
	if errors.Is(err, errDBClosed) {
		return fmt.Errorf("mysql: %s: %w", op, errNoticeClosed)
	}
	return wrapErr(op, s.dsn, err)
}

func checkNoticeKey(k persistence.NoticeKey) error {
	return errors.Join(
		checkLen("source_name", k.SourceName, maxNoticeSource, true),
		checkLen("app_code", k.AppCode, maxAppCode, true),
		checkLen("source_event_id", k.SourceEventID, maxEventID, true),
		checkLen("channel", k.Channel, maxNoticeChannel, true),
	)
}

const noticeColumns = "source_name, app_code, source_event_id, channel, event_type, user_id, ext, payload, status, retry_count, " +
	"next_retry_at_ms, locked_by, lock_until_ms, last_error, ingress, source_created_at_ms, created_at_ms, updated_at_ms, " +
	"delivered_at_ms, requeue_count, requeued_at_ms"

func scanNotice(sc interface{ Scan(...any) error }) (persistence.NoticeDelivery, error) {
	var (
		d                     persistence.NoticeDelivery
		payload               []byte
		lockedBy, lastError   sql.NullString
		delivered, requeuedAt sql.NullInt64
	)
	err := sc.Scan(&d.SourceName, &d.AppCode, &d.SourceEventID, &d.Channel, &d.EventType, &d.UserID, &d.Ext, &payload,
		&d.Status, &d.RetryCount, &d.NextRetryAtMs, &lockedBy, &d.LockUntilMs, &lastError, &d.Ingress,
		&d.SourceCreatedAtMs, &d.CreatedAtMs, &d.UpdatedAtMs, &delivered, &d.RequeueCount, &requeuedAt)
	d.Payload = payload
	d.LockedBy, d.LastError = lockedBy.String, lastError.String
	d.DeliveredAtMs, d.RequeuedAtMs = delivered.Int64, requeuedAt.Int64
	return d, err
}

type rowsQueryer interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

func (s *NoticeStore) query(ctx context.Context, q rowsQueryer, op, query string, args ...any) ([]persistence.NoticeDelivery, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer rows.Close()
	var out []persistence.NoticeDelivery
	for rows.Next() {
		d, err := scanNotice(rows)
		if err != nil {
			return nil, s.wrap(op, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}

func keyLess(a, b persistence.NoticeKey) int {
	for _, c := range [][2]string{{a.SourceName, b.SourceName}, {a.AppCode, b.AppCode}, {a.SourceEventID, b.SourceEventID}, {a.Channel, b.Channel}} {
		if r := strings.Compare(c[0], c[1]); r != 0 {
			return r
		}
	}
	return 0
}

// retryDeadlock runs fn again when InnoDB picked it as a deadlock victim.
// Writes of many rows sort them by primary key first, so deadlocks are
// rare; they are not impossible (secondary index order).
func retryDeadlock(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !isDeadlock(err) || attempt >= noticeMaxAttempts || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt) * 5 * time.Millisecond)
	}
}

// Ingest implements persistence.NoticeStore: one multi-row INSERT ... ON DUPLICATE
// KEY UPDATE that changes nothing on a duplicate (not INSERT IGNORE, which
// would also turn a too-long value into a silent truncation), rows in
// primary-key order so two ingests never lock in opposite orders.
func (s *NoticeStore) Ingest(ctx context.Context, rows []persistence.NoticeDelivery, nowMs int64) (int, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	if len(rows) == 0 {
		return 0, nil
	}
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b persistence.NoticeDelivery) int { return keyLess(a.NoticeKey, b.NoticeKey) })
	var q strings.Builder
	q.WriteString("INSERT INTO notice_delivery_events (" + noticeColumns + ") VALUES ")
	args := make([]any, 0, len(rows)*21)
	for i, d := range rows {
		if err := errors.Join(checkNoticeKey(d.NoticeKey),
			checkLen("event_type", d.EventType, maxEventType, false),
			checkLen("user_id", d.UserID, maxNoticeUser, false),
			checkLen("ext", d.Ext, maxNoticeExt, false),
			checkLen("ingress", d.Ingress, maxNoticeIngress, false)); err != nil {
			return 0, fmt.Errorf("mysql: ingest %s: %w", d.NoticeKey, err)
		}
		if !json.Valid(d.Payload) {
			return 0, fmt.Errorf("mysql: ingest %s: %w: payload is not JSON", d.NoticeKey, errInvalid)
		}
		status, next := persistence.NoticeDelivering, d.SourceCreatedAtMs
		switch d.Status {
		case "":
		case persistence.NoticeFailed:
			status, next = persistence.NoticeFailed, nowMs
		default:
			return 0, fmt.Errorf("mysql: ingest %s: %w: status %q (want empty or failed)", d.NoticeKey, errInvalid, d.Status)
		}
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,?,?,?,?,?,?,?,NULL,0,?,?,?,?,?,NULL,0,NULL)")
		args = append(args, d.SourceName, d.AppCode, d.SourceEventID, d.Channel, d.EventType, d.UserID, d.Ext, string(d.Payload),
			status, d.RetryCount, next, nullString(truncateChars(d.LastError, maxLastError)), d.Ingress, d.SourceCreatedAtMs, nowMs, nowMs)
	}
	q.WriteString(" ON DUPLICATE KEY UPDATE source_name = source_name")
	var n int64
	err = retryDeadlock(ctx, func() error {
		res, err := s.db.ExecContext(ctx, q.String(), args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, s.wrap("ingest notices", err)
	}
	return int(n), nil
}

func nullString(v string) any {
	if v == "" {
		return nil
	}
	return v
}

// Claim implements persistence.NoticeStore. One transaction locks the oldest due
// retryable rows, then the oldest unleased delivering rows, with FOR
// UPDATE SKIP LOCKED (an instance claiming at the same moment skips the
// rows this one holds instead of waiting for them), and leases them; the
// lock_until check makes the lease hold after COMMIT.
func (s *NoticeStore) Claim(ctx context.Context, source, owner string, nowMs, leaseMs int64, limit int) ([]persistence.NoticeDelivery, error) {
	if limit <= 0 || source == "" {
		return nil, nil
	}
	if err := checkLen("owner", owner, maxLockedBy, true); err != nil {
		return nil, err
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var out []persistence.NoticeDelivery
	err = retryDeadlock(ctx, func() error {
		out, err = s.claimOnce(ctx, source, owner, nowMs, leaseMs, limit)
		return err
	})
	if err != nil {
		return nil, s.wrap("claim notices", err)
	}
	return out, nil
}

func (s *NoticeStore) claimOnce(ctx context.Context, source, owner string, nowMs, leaseMs int64, limit int) ([]persistence.NoticeDelivery, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	sel := "SELECT " + noticeColumns + " FROM notice_delivery_events WHERE status = ? AND source_name = ? AND next_retry_at_ms <= ?"
	rows, err := s.query(ctx, tx, "claim retryable", sel+" ORDER BY next_retry_at_ms LIMIT ? FOR UPDATE SKIP LOCKED",
		persistence.NoticeRetryable, source, nowMs, limit)
	if err != nil {
		return nil, err
	}
	if len(rows) < limit {
		more, err := s.query(ctx, tx, "claim delivering", sel+" AND lock_until_ms <= ? ORDER BY next_retry_at_ms LIMIT ? FOR UPDATE SKIP LOCKED",
			persistence.NoticeDelivering, source, nowMs, nowMs, limit-len(rows))
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	until := nowMs + leaseMs
	keys := make([]persistence.NoticeKey, len(rows))
	for i := range rows {
		keys[i] = rows[i].NoticeKey
		rows[i].Status, rows[i].LockedBy, rows[i].LockUntilMs, rows[i].NextRetryAtMs, rows[i].UpdatedAtMs =
			persistence.NoticeDelivering, owner, until, until, nowMs
	}
	err = forKeyGroups(keys, func(where string, args []any) error {
		_, err := tx.ExecContext(ctx, "UPDATE notice_delivery_events SET status = ?, locked_by = ?, lock_until_ms = ?, next_retry_at_ms = ?, updated_at_ms = ? WHERE "+where,
			append([]any{persistence.NoticeDelivering, owner, until, until, nowMs}, args...)...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return rows, nil
}

// forKeyGroups calls fn with a WHERE clause (and its arguments) for each
// (source_name, app_code, channel) group of keys, the event ids of a group
// in one IN list (primary-key order): a plain equality prefix plus IN that
// every MySQL version range-scans on the primary key.
func forKeyGroups(keys []persistence.NoticeKey, fn func(where string, args []any) error) error {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, keyLess)
	for i := 0; i < len(keys); {
		j := i
		for j < len(keys) && keys[j].SourceName == keys[i].SourceName && keys[j].AppCode == keys[i].AppCode && keys[j].Channel == keys[i].Channel {
			j++
		}
		var b strings.Builder
		b.WriteString("source_name = ? AND app_code = ? AND channel = ? AND source_event_id IN (")
		args := []any{keys[i].SourceName, keys[i].AppCode, keys[i].Channel}
		for k := i; k < j; k++ {
			if k > i {
				b.WriteByte(',')
			}
			b.WriteByte('?')
			args = append(args, keys[k].SourceEventID)
		}
		b.WriteByte(')')
		if err := fn(b.String(), args); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func validKeys(keys []persistence.NoticeKey) []persistence.NoticeKey {
	out := make([]persistence.NoticeKey, 0, len(keys))
	for _, k := range keys {
		if checkNoticeKey(k) == nil {
			out = append(out, k)
		}
	}
	return out
}

// MarkDelivered implements persistence.NoticeStore: one UPDATE per (source, app,
// channel) group.
func (s *NoticeStore) MarkDelivered(ctx context.Context, keys []persistence.NoticeKey, nowMs int64) error {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	keys = validKeys(keys)
	if len(keys) == 0 {
		return nil
	}
	err = forKeyGroups(keys, func(where string, args []any) error {
		return retryDeadlock(ctx, func() error {
			_, err := s.db.ExecContext(ctx, "UPDATE notice_delivery_events SET status = ?, locked_by = NULL, lock_until_ms = 0,"+
				" next_retry_at_ms = ?, delivered_at_ms = ?, updated_at_ms = ? WHERE "+where+" AND status IN (?, ?)",
				append(append([]any{persistence.NoticeDelivered, nowMs, nowMs, nowMs}, args...), persistence.NoticeDelivering, persistence.NoticeRetryable)...)
			return err
		})
	})
	return s.wrap("mark notices delivered", err)
}

func (s *NoticeStore) markFailure(ctx context.Context, op string, k persistence.NoticeKey, owner, status string, retryCount int, lastError string, nextMs, nowMs int64) error {
	if err := checkNoticeKey(k); err != nil {
		return err
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var n int64
	err = retryDeadlock(ctx, func() error {
		res, err := s.db.ExecContext(ctx, "UPDATE notice_delivery_events SET status = ?, retry_count = ?, last_error = ?, locked_by = NULL,"+
			" lock_until_ms = 0, next_retry_at_ms = ?, updated_at_ms = ?"+
			" WHERE source_name = ? AND app_code = ? AND source_event_id = ? AND channel = ? AND status = ? AND locked_by = ?",
			status, retryCount, nullString(truncateChars(lastError, maxLastError)), nextMs, nowMs,
			k.SourceName, k.AppCode, k.SourceEventID, k.Channel, persistence.NoticeDelivering, owner)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return s.wrap(op, err)
	}
	if n == 0 {
		// The update always changes the row when it matches (the status
		// and the lease at least), so no row means no match.
		return fmt.Errorf("mysql: %s: notice %s is not held by %q: %w", op, k, owner, persistence.ErrConflict)
	}
	return nil
}

// MarkRetryable implements persistence.NoticeStore.
func (s *NoticeStore) MarkRetryable(ctx context.Context, k persistence.NoticeKey, owner string, retryCount int, lastError string, nextRetryAtMs, nowMs int64) error {
	return s.markFailure(ctx, "mark notice retryable", k, owner, persistence.NoticeRetryable, retryCount, lastError, nextRetryAtMs, nowMs)
}

// MarkFailed implements persistence.NoticeStore.
func (s *NoticeStore) MarkFailed(ctx context.Context, k persistence.NoticeKey, owner string, retryCount int, lastError string, nowMs int64) error {
	return s.markFailure(ctx, "mark notice failed", k, owner, persistence.NoticeFailed, retryCount, lastError, nowMs, nowMs)
}

// Release implements persistence.NoticeStore.
func (s *NoticeStore) Release(ctx context.Context, keys []persistence.NoticeKey, owner string, nowMs int64) error {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	keys = validKeys(keys)
	if len(keys) == 0 || owner == "" {
		return nil
	}
	err = forKeyGroups(keys, func(where string, args []any) error {
		return retryDeadlock(ctx, func() error {
			_, err := s.db.ExecContext(ctx, "UPDATE notice_delivery_events SET locked_by = NULL, lock_until_ms = 0, next_retry_at_ms = ?,"+
				" updated_at_ms = ? WHERE "+where+" AND status = ? AND locked_by = ?",
				append(append([]any{nowMs, nowMs}, args...), persistence.NoticeDelivering, owner)...)
			return err
		})
	})
	return s.wrap("release notices", err)
}

// Requeue implements persistence.NoticeStore.
func (s *NoticeStore) Requeue(ctx context.Context, k persistence.NoticeKey, nowMs int64) (persistence.NoticeDelivery, error) {
	if err := checkNoticeKey(k); err != nil {
		return persistence.NoticeDelivery{}, fmt.Errorf("mysql: requeue: notice %s: %w", k, persistence.ErrNotFound)
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return persistence.NoticeDelivery{}, err
	}
	res, err := s.db.ExecContext(cctx, "UPDATE notice_delivery_events SET status = ?, retry_count = 0, next_retry_at_ms = ?, updated_at_ms = ?,"+
		" requeue_count = requeue_count + 1, requeued_at_ms = ?"+
		" WHERE source_name = ? AND app_code = ? AND source_event_id = ? AND channel = ? AND status = ?",
		persistence.NoticeRetryable, nowMs, nowMs, nowMs, k.SourceName, k.AppCode, k.SourceEventID, k.Channel, persistence.NoticeFailed)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	cancel()
	if err != nil {
		return persistence.NoticeDelivery{}, s.wrap("requeue notice", err)
	}
	d, err := s.Get(ctx, k)
	if err != nil {
		return persistence.NoticeDelivery{}, err
	}
	if n == 0 {
		return d, fmt.Errorf("mysql: requeue: notice %s is %s, not failed: %w", k, d.Status, persistence.ErrConflict)
	}
	return d, nil
}

// Get implements persistence.NoticeStore.
func (s *NoticeStore) Get(ctx context.Context, k persistence.NoticeKey) (persistence.NoticeDelivery, error) {
	if checkNoticeKey(k) != nil {
		return persistence.NoticeDelivery{}, fmt.Errorf("mysql: notice %s: %w", k, persistence.ErrNotFound)
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return persistence.NoticeDelivery{}, err
	}
	defer cancel()
	rows, err := s.query(ctx, s.db, "get notice", "SELECT "+noticeColumns+
		" FROM notice_delivery_events WHERE source_name = ? AND app_code = ? AND source_event_id = ? AND channel = ?",
		k.SourceName, k.AppCode, k.SourceEventID, k.Channel)
	if err != nil {
		return persistence.NoticeDelivery{}, err
	}
	if len(rows) == 0 {
		return persistence.NoticeDelivery{}, fmt.Errorf("mysql: notice %s: %w", k, persistence.ErrNotFound)
	}
	return rows[0], nil
}

// FindBySourceEvent implements persistence.NoticeStore.
func (s *NoticeStore) FindBySourceEvent(ctx context.Context, sourceEventID string) ([]persistence.NoticeDelivery, error) {
	if sourceEventID == "" || len(sourceEventID) > 4*maxEventID {
		return nil, nil
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	return s.query(ctx, s.db, "find notices", "SELECT "+noticeColumns+
		" FROM notice_delivery_events WHERE source_event_id = ? ORDER BY source_name, app_code, channel LIMIT 100", sourceEventID)
}

// List implements persistence.NoticeStore. The order is idx_notice_due's (with the
// primary key InnoDB appends to it), so no sort is needed.
func (s *NoticeStore) List(ctx context.Context, f persistence.NoticeFilter) ([]persistence.NoticeDelivery, error) {
	if f.Limit <= 0 {
		return nil, nil
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var where []string
	var args []any
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	if f.SourceName != "" {
		where, args = append(where, "source_name = ?"), append(args, f.SourceName)
	}
	q := "SELECT " + noticeColumns + " FROM notice_delivery_events"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY status, source_name, next_retry_at_ms, app_code, source_event_id, channel LIMIT ?"
	return s.query(ctx, s.db, "list notices", q, append(args, f.Limit)...)
}

// Stats implements persistence.NoticeStore: one grouped pass over idx_notice_due's
// ranges of the source's open and failed rows.
func (s *NoticeStore) Stats(ctx context.Context, source string, nowMs int64) (persistence.NoticeStats, error) {
	var st persistence.NoticeStats
	if source == "" {
		return st, nil
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return st, err
	}
	defer cancel()
	rows, err := s.db.QueryContext(ctx, "SELECT status, COUNT(*), MIN(next_retry_at_ms) FROM notice_delivery_events"+
		" WHERE status IN (?, ?, ?) AND source_name = ? GROUP BY status",
		persistence.NoticeDelivering, persistence.NoticeRetryable, persistence.NoticeFailed, source)
	if err != nil {
		return st, s.wrap("notice stats", err)
	}
	defer rows.Close()
	for rows.Next() {
		var status string
		var n, oldest int64
		if err := rows.Scan(&status, &n, &oldest); err != nil {
			return st, s.wrap("notice stats", err)
		}
		switch status {
		case persistence.NoticeDelivering:
			st.Delivering = n
		case persistence.NoticeRetryable:
			st.Retryable = n
		case persistence.NoticeFailed:
			st.Failed = n
			continue
		}
		if oldest <= nowMs && (st.OldestDueMs == 0 || oldest < st.OldestDueMs) {
			st.OldestDueMs = oldest
		}
	}
	return st, s.wrap("notice stats", rows.Err())
}

// ClaimCursor implements persistence.NoticeStore: the cursor row is created if
// missing, and the lease is taken in one conditional UPDATE, then read
// back to see who holds it.
func (s *NoticeStore) ClaimCursor(ctx context.Context, source, owner string, nowMs, leaseMs int64) (persistence.NoticeCursor, bool, error) {
	if err := errors.Join(checkLen("source", source, maxNoticeSource, true), checkLen("owner", owner, maxLockedBy, true)); err != nil {
		return persistence.NoticeCursor{}, false, err
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return persistence.NoticeCursor{}, false, err
	}
	defer cancel()
	if _, err := s.db.ExecContext(ctx, "INSERT INTO notice_source_cursors (source_name, updated_at_ms) VALUES (?, ?)"+
		" ON DUPLICATE KEY UPDATE source_name = source_name", source, nowMs); err != nil {
		return persistence.NoticeCursor{}, false, s.wrap("claim cursor", err)
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE notice_source_cursors SET locked_by = ?, lock_until_ms = ?"+
		" WHERE source_name = ? AND (locked_by = ? OR locked_by IS NULL OR lock_until_ms <= ?)",
		owner, nowMs+leaseMs, source, owner, nowMs); err != nil {
		return persistence.NoticeCursor{}, false, s.wrap("claim cursor", err)
	}
	var c persistence.NoticeCursor
	var holder sql.NullString
	if err := s.db.QueryRowContext(ctx, "SELECT position_num, position_key, locked_by FROM notice_source_cursors WHERE source_name = ?",
		source).Scan(&c.Num, &c.Key, &holder); err != nil {
		return persistence.NoticeCursor{}, false, s.wrap("claim cursor", err)
	}
	return c, holder.String == owner, nil
}

// SaveCursor implements persistence.NoticeStore.
func (s *NoticeStore) SaveCursor(ctx context.Context, source, owner string, c persistence.NoticeCursor, nowMs int64) error {
	if err := checkLen("cursor key", c.Key, maxEventID, false); err != nil {
		return err
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = s.db.ExecContext(ctx, "UPDATE notice_source_cursors SET position_num = ?, position_key = ?, updated_at_ms = ?"+
		" WHERE source_name = ? AND locked_by = ?", c.Num, c.Key, nowMs, source, owner)
	return s.wrap("save cursor", err)
}
