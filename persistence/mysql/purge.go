package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/hyapp/roomcell/room"

	"github.com/hyapp/roomcell/persistence"
)

// The retention rules of persistence.PurgeRequest on MySQL. Every batch
// reads at most Limit keys through an index, then deletes exactly those
// rows by primary key (or by one primary-key range of one room) in one
// autocommit statement, re-checking the rule in the DELETE: a batch holds
// row locks for milliseconds and never on a row a room command writes
// (pending outbox rows, log rows after the snapshot).

var (
	_ persistence.Purger            = (*Store)(nil)
	_ persistence.Purger            = (*WalletStore)(nil)
	_ persistence.Purger            = (*NoticeStore)(nil)
	_ persistence.ConsumerPositions = (*NoticeStore)(nil)
)

// purgeDB is what the purge code needs of a store: its pool (whose
// default database holds the tables), its per-call bound and its error
// classifier.
type purgeDB struct {
	db      *sql.DB
	timeout time.Duration
	wrap    func(op string, err error) error
}

func (p purgeDB) ctx(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ready(ctx); err != nil {
		return nil, nil, err
	}
	c, cancel := context.WithTimeout(ctx, p.timeout)
	return c, cancel, nil
}

// purgeLockName is the GET_LOCK name of a table's purge lease, per
// database (64 characters at most, as MySQL requires).
func purgeLockName(database, table string) string {
	name := "roomcell_purge." + database + "." + table
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(database + "." + table))
	return "roomcell_purge." + hex.EncodeToString(sum[:20])
}

// sqlLease holds a GET_LOCK on a connection of its own. The server drops
// the lock when that connection dies, so a node killed mid-round hands
// the table to another node at once, and a paused node's lock does no
// harm: a purge deletes only rows the rules allow, so two purgers at
// worst both try to delete the same rows.
type sqlLease struct {
	conn *sql.Conn
	name string
	once sync.Once
}

func (l *sqlLease) Release() {
	l.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = l.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", l.name)
		_ = l.conn.Close()
	})
}

func (p purgeDB) acquire(ctx context.Context, table, owner string) (persistence.PurgeLease, bool, error) {
	if !persistence.IsPurgeTable(table) || owner == "" {
		return nil, false, fmt.Errorf("mysql: purge lease needs a purge table and an owner (table %q)", table)
	}
	ctx, cancel, err := p.ctx(ctx)
	if err != nil {
		return nil, false, err
	}
	defer cancel()
	conn, err := p.db.Conn(ctx)
	if err != nil {
		return nil, false, p.wrap("purge lease", err)
	}
	var database string
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&database); err != nil {
		_ = conn.Close()
		return nil, false, p.wrap("purge lease", err)
	}
	name := purgeLockName(database, table)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil {
		_ = conn.Close()
		return nil, false, p.wrap("purge lease", err)
	}
	if !got.Valid || got.Int64 != 1 {
		_ = conn.Close()
		return nil, false, nil
	}
	return &sqlLease{conn: conn, name: name}, true, nil
}

func checkPurge(r persistence.PurgeRequest, batch bool, have ...string) error {
	err := r.Validate()
	if batch {
		err = r.ValidateBatch()
	}
	if err != nil {
		return err
	}
	for _, t := range have {
		if r.Table == t {
			return nil
		}
	}
	return fmt.Errorf("mysql: this store does not hold %q (has %v)", r.Table, have)
}

// count runs SELECT COUNT(*) over a LIMITed subquery: a dry run reads at
// most limit rows.
func (p purgeDB) count(ctx context.Context, op, inner string, args ...any) (int64, error) {
	ctx, cancel, err := p.ctx(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	var n int64
	if err := p.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM ("+inner+") t", args...).Scan(&n); err != nil {
		return 0, p.wrap(op, err)
	}
	return n, nil
}

// retention reads information_schema's row estimate of table and the
// oldest creation time from oldestQuery (one row, one nullable column).
func (p purgeDB) retention(ctx context.Context, table, oldestQuery string) (persistence.TableRetention, error) {
	out := persistence.TableRetention{Table: table}
	ctx, cancel, err := p.ctx(ctx)
	if err != nil {
		return out, err
	}
	defer cancel()
	var rows sql.NullInt64
	if err := p.db.QueryRowContext(ctx, "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
		table).Scan(&rows); err != nil {
		return out, p.wrap("table retention "+table, err)
	}
	var oldest sql.NullInt64
	if err := p.db.QueryRowContext(ctx, oldestQuery).Scan(&oldest); err != nil {
		return out, p.wrap("table retention "+table, err)
	}
	out.RowEstimate, out.OldestCreatedAtMs = rows.Int64, oldest.Int64
	return out, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// ---- room store: room_outbox and room_command_log ----

func (s *Store) purgeDB() purgeDB { return purgeDB{db: s.db, timeout: s.queryTimeout, wrap: s.wrap} }

// PurgeTables implements persistence.Purger.
func (s *Store) PurgeTables() []string {
	return []string{persistence.PurgeRoomOutbox, persistence.PurgeCommandLog}
}

// AcquirePurgeLease implements persistence.Purger with GET_LOCK; ttlMs is
// not needed (the lock dies with its connection).
func (s *Store) AcquirePurgeLease(ctx context.Context, table, owner string, _, _ int64) (persistence.PurgeLease, bool, error) {
	return s.purgeDB().acquire(ctx, table, owner)
}

// Purge implements persistence.Purger.
func (s *Store) Purge(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	if err := checkPurge(r, true, s.PurgeTables()...); err != nil {
		return persistence.PurgeResult{}, err
	}
	if r.Table == persistence.PurgeRoomOutbox {
		return s.purgeOutbox(ctx, r)
	}
	return s.purgeCommandLog(ctx, r)
}

// kickedHeld is the SQL form of the room notice cursor rule: a row of an
// event that causes a notice (room.Notice: RoomUserKicked) stays until
// the cursor has passed it. Its columns are room_outbox's under the alias o.
func kickedHeld(c persistence.ConsumerPosition) (string, []any) {
	types := room.TypesCausing(room.Notice)
	in := strings.TrimSuffix(strings.Repeat("?,", len(types)), ",")
	args := make([]any, 0, len(types)+3)
	for _, t := range types {
		args = append(args, t)
	}
	if !c.Found {
		return " AND o.event_type NOT IN (" + in + ")", args
	}
	return " AND (o.event_type NOT IN (" + in + ") OR o.created_at_ms < ? OR (o.created_at_ms = ? AND o.event_id <= ?))",
		append(args, c.Num, c.Num, c.Key)
}

// purgeOutbox walks the published rows by idx_room_outbox_pending (status,
// created_at_ms, event_id) from After, filters them by the rule (a row the
// MQ fanout has still to publish stays) and
// deletes the eligible ones by event_id. After is "<created_ms>/<id>".
func (s *Store) purgeOutbox(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	var res persistence.PurgeResult
	afterMs, afterID, err := persistence.ParseOutboxToken(r.After)
	if err != nil {
		return res, err
	}
	p := s.purgeDB()
	qctx, cancel, err := p.ctx(ctx)
	if err != nil {
		return res, err
	}
	defer cancel()
	rows, err := s.db.QueryContext(qctx, "SELECT o.event_id, o.event_type, o.created_at_ms, o.published_at_ms, COALESCE(m.mq_status, 'none')"+
		" FROM room_outbox o FORCE INDEX (idx_room_outbox_pending) LEFT JOIN room_outbox_mq m ON m.event_id = o.event_id"+
		" WHERE o.status = ? AND o.created_at_ms < ? AND o.created_at_ms >= ? AND (o.created_at_ms > ? OR o.event_id > ?)"+
		" ORDER BY o.created_at_ms, o.event_id LIMIT ?",
		persistence.OutboxPublished, r.CutoffMs, afterMs, afterMs, afterID, r.Limit)
	if err != nil {
		return res, s.wrap("purge room_outbox", err)
	}
	var ids []any
	seen := 0
	for rows.Next() {
		var row persistence.OutboxRow
		if err := rows.Scan(&row.Envelope.EventID, &row.Envelope.EventType, &row.CreatedAtMs, &row.PublishedAtMs, &row.MQStatus); err != nil {
			rows.Close()
			return res, s.wrap("purge room_outbox", err)
		}
		row.Status = persistence.OutboxPublished
		seen++
		res.Next = persistence.OutboxToken(row.CreatedAtMs, row.Envelope.EventID)
		if persistence.OutboxRowPurgeable(row, r) {
			ids = append(ids, row.Envelope.EventID)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return res, s.wrap("purge room_outbox", err)
	}
	res.Done = seen < r.Limit
	if len(ids) == 0 {
		return res, nil
	}
	held, heldArgs := kickedHeld(r.Consumer)
	args := append(ids, persistence.OutboxPublished, r.CutoffMs, r.CutoffMs)
	// One statement deletes each row with its room_outbox_mq row (none
	// while that is MQ-pending), so no MQ row outlives its outbox row.
	_, err = s.db.ExecContext(qctx, "DELETE o, m FROM room_outbox o LEFT JOIN room_outbox_mq m ON m.event_id = o.event_id"+
		" WHERE o.event_id IN ("+placeholders(len(ids))+")"+
		" AND o.status = ? AND o.created_at_ms < ? AND o.published_at_ms < ? AND (m.mq_status IS NULL OR m.mq_status <> 'pending')"+
		held, append(args, heldArgs...)...)
	if err != nil {
		return res, s.wrap("purge room_outbox", err)
	}
	// RowsAffected would count the room_outbox_mq rows deleted too: the
	// outbox rows deleted are those of ids no longer there.
	var left int
	if err := s.db.QueryRowContext(qctx, "SELECT COUNT(*) FROM room_outbox WHERE event_id IN ("+placeholders(len(ids))+")", ids...).Scan(&left); err != nil {
		return res, s.wrap("purge room_outbox", err)
	}
	res.Rows = len(ids) - left
	return res, nil
}

// purgeRoomsPerBatch bounds how many rooms one command log batch visits,
// so a batch of rooms with nothing to delete still ends soon.
const purgeRoomsPerBatch = 100

// purgeCommandLog walks room_snapshots in key order from After and, in
// each room, the log rows from its start (primary key order) while they
// are at or below the snapshot's seq and older than the cutoff; it deletes
// that run by one primary-key range per room. A room's rows are stamped in
// seq order, so the first row inside the window ends the room's run.
// After is "<app>\x00<room>\x00<seq>", the last row looked at.
func (s *Store) purgeCommandLog(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	var res persistence.PurgeResult
	after, afterSeq, err := persistence.ParseLogToken(r.After)
	if err != nil {
		return res, err
	}
	afterApp, afterRoom := after.AppCode, after.RoomID
	p := s.purgeDB()
	qctx, cancel, err := p.ctx(ctx)
	if err != nil {
		return res, err
	}
	defer cancel()
	type snap struct {
		app, room string
		seq       int64
	}
	rows, err := s.db.QueryContext(qctx, "SELECT app_code, room_id, seq FROM room_snapshots"+
		" WHERE app_code > ? OR (app_code = ? AND room_id >= ?) ORDER BY app_code, room_id LIMIT ?",
		afterApp, afterApp, afterRoom, purgeRoomsPerBatch)
	if err != nil {
		return res, s.wrap("purge room_command_log", err)
	}
	var snaps []snap
	for rows.Next() {
		var sn snap
		if err := rows.Scan(&sn.app, &sn.room, &sn.seq); err != nil {
			rows.Close()
			return res, s.wrap("purge room_command_log", err)
		}
		snaps = append(snaps, sn)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return res, s.wrap("purge room_command_log", err)
	}
	res.Done = len(snaps) < purgeRoomsPerBatch
	var runs []logRun
	planned := 0
	for _, sn := range snaps {
		key := persistence.RoomKey{AppCode: sn.app, RoomID: sn.room}
		from := int64(math.MinInt64)
		if r.After != "" && sn.app == afterApp && sn.room == afterRoom {
			from = afterSeq
		}
		budget := r.Limit - planned
		first, last, n, full, err := s.commandRun(qctx, sn.app, sn.room, from, sn.seq, r.CutoffMs, budget)
		if err != nil {
			return res, err
		}
		if n > 0 {
			runs = append(runs, logRun{app: sn.app, room: sn.room, first: first, last: last})
			planned += n
		}
		if full {
			res.Next, res.Done = persistence.LogToken(key, last), false
			break
		}
		res.Next = persistence.LogToken(key, math.MaxInt64)
	}
	n, err := s.deleteRuns(qctx, runs, r.CutoffMs)
	res.Rows = n
	return res, err
}

// logRun is one room's run of log rows a batch deletes.
type logRun struct {
	app, room   string
	first, last int64
}

// deleteRuns deletes a batch's runs in one transaction: one commit (one
// log flush) per batch instead of one per room, so the purge costs the
// room commands' group commits as little as it can. The DELETE needs no
// read of room_snapshots (which would lock the row an append's snapshot
// writes): a snapshot's seq only ever grows, so a run at or below the seq
// the walk read stays below the room's snapshot.
func (s *Store) deleteRuns(ctx context.Context, runs []logRun, cutoffMs int64) (int, error) {
	if len(runs) == 0 {
		return 0, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, s.wrap("purge room_command_log", err)
	}
	defer func() { _ = tx.Rollback() }()
	total := 0
	for _, run := range runs {
		out, err := tx.ExecContext(ctx, "DELETE FROM room_command_log WHERE app_code = ? AND room_id = ? AND seq >= ? AND seq <= ? AND created_at_ms < ?",
			run.app, run.room, run.first, run.last, cutoffMs)
		if err != nil {
			return 0, s.wrap("purge room_command_log", err)
		}
		d, _ := out.RowsAffected()
		total += int(d)
	}
	if err := tx.Commit(); err != nil {
		return 0, s.wrap("purge room_command_log", err)
	}
	return total, nil
}

// commandRun finds the room's eligible run after seq from: up to budget
// rows with seq <= snapSeq and created_at_ms < cutoff, in seq order,
// stopping at the first row that is not. full means the budget ran out
// before the run ended.
func (s *Store) commandRun(ctx context.Context, app, room string, from, snapSeq, cutoff int64, budget int) (first, last int64, n int, full bool, err error) {
	if budget <= 0 {
		return 0, from, 0, true, nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT seq, created_at_ms FROM room_command_log"+
		" WHERE app_code = ? AND room_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?", app, room, from, snapSeq, budget+1)
	if err != nil {
		return 0, 0, 0, false, s.wrap("purge room_command_log", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq, created int64
		if err := rows.Scan(&seq, &created); err != nil {
			return 0, 0, 0, false, s.wrap("purge room_command_log", err)
		}
		if created >= cutoff {
			break
		}
		if n == budget {
			return first, last, n, true, nil
		}
		if n == 0 {
			first = seq
		}
		last = seq
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, 0, 0, false, s.wrap("purge room_command_log", err)
	}
	return first, last, n, false, nil
}

// CountPurgeable implements persistence.Purger.
func (s *Store) CountPurgeable(ctx context.Context, r persistence.PurgeRequest) (int64, error) {
	if err := checkPurge(r, false, s.PurgeTables()...); err != nil {
		return 0, err
	}
	p := s.purgeDB()
	if r.Table == persistence.PurgeRoomOutbox {
		held, heldArgs := kickedHeld(r.Consumer)
		args := append([]any{persistence.OutboxPublished, r.CutoffMs, r.CutoffMs}, heldArgs...)
		return p.count(ctx, "count room_outbox", "SELECT 1 FROM room_outbox o WHERE o.status = ? AND o.created_at_ms < ?"+
			" AND o.published_at_ms < ? AND NOT EXISTS (SELECT 1 FROM room_outbox_mq m WHERE m.event_id = o.event_id AND m.mq_status = 'pending')"+
			held+" LIMIT ?", append(args, r.Limit)...)
	}
	return p.count(ctx, "count room_command_log", "SELECT 1 FROM room_snapshots s JOIN room_command_log l"+
		" ON l.app_code = s.app_code AND l.room_id = s.room_id AND l.seq <= s.seq WHERE l.created_at_ms < ? LIMIT ?", r.CutoffMs, r.Limit)
}

// TableRetention implements persistence.Purger. The oldest row comes from
// index reads only: room_outbox's per-status minimum of
// idx_room_outbox_pending, and each room's first log row (a loose scan of
// the primary key, one entry per room).
func (s *Store) TableRetention(ctx context.Context, table string) (persistence.TableRetention, error) {
	p := s.purgeDB()
	switch table {
	case persistence.PurgeRoomOutbox:
		return p.retention(ctx, table, "SELECT MIN(m) FROM (SELECT MIN(created_at_ms) AS m FROM room_outbox GROUP BY status) t")
	case persistence.PurgeCommandLog:
		return p.retention(ctx, table, "SELECT MIN(l.created_at_ms) FROM (SELECT app_code, room_id, MIN(seq) AS seq FROM room_command_log"+
			" GROUP BY app_code, room_id) f JOIN room_command_log l ON l.app_code = f.app_code AND l.room_id = f.room_id AND l.seq = f.seq")
	}
	return persistence.TableRetention{}, fmt.Errorf("mysql: this store does not hold %q", table)
}

// ---- wallet store: wallet_outbox ----

func (s *WalletStore) purgeDB() purgeDB { return purgeDB{db: s.db, timeout: s.timeout, wrap: s.wrap} }

// PurgeTables implements persistence.Purger.
func (s *WalletStore) PurgeTables() []string { return []string{persistence.PurgeWalletOutbox} }

// AcquirePurgeLease implements persistence.Purger with GET_LOCK.
func (s *WalletStore) AcquirePurgeLease(ctx context.Context, table, owner string, _, _ int64) (persistence.PurgeLease, bool, error) {
	return s.purgeDB().acquire(ctx, table, owner)
}

// walletBound is the highest id a purge may delete: what the notice cursor
// has passed, below the newest row (InnoDB before MySQL 8 recomputes
// AUTO_INCREMENT from the largest id at restart: deleting the newest row
// could hand its id out again, behind the cursor). ok=false: nothing may go.
func (s *WalletStore) walletBound(ctx context.Context, c persistence.ConsumerPosition) (int64, bool, error) {
	if !c.Found {
		return 0, false, nil
	}
	var newest sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MAX(id) FROM wallet_outbox").Scan(&newest); err != nil {
		return 0, false, s.wrap("purge wallet_outbox", err)
	}
	if !newest.Valid {
		return 0, false, nil
	}
	return min(c.Num, newest.Int64-1), true, nil
}

// Purge implements persistence.Purger: the rows from the start of
// uk_wallet_outbox_id while they are at or below the bound and older than
// the cutoff, deleted by event_id.
func (s *WalletStore) Purge(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	var res persistence.PurgeResult
	if err := checkPurge(r, true, s.PurgeTables()...); err != nil {
		return res, err
	}
	qctx, cancel, err := s.purgeDB().ctx(ctx)
	if err != nil {
		return res, err
	}
	defer cancel()
	bound, ok, err := s.walletBound(qctx, r.Consumer)
	if err != nil || !ok {
		res.Done = err == nil
		return res, err
	}
	rows, err := s.db.QueryContext(qctx, "SELECT event_id, created_at_ms FROM wallet_outbox WHERE id <= ? ORDER BY id LIMIT ?", bound, r.Limit)
	if err != nil {
		return res, s.wrap("purge wallet_outbox", err)
	}
	var ids []any
	seen, stopped := 0, false
	for rows.Next() {
		var id string
		var created int64
		if err := rows.Scan(&id, &created); err != nil {
			rows.Close()
			return res, s.wrap("purge wallet_outbox", err)
		}
		seen++
		if created >= r.CutoffMs {
			stopped = true
			break
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return res, s.wrap("purge wallet_outbox", err)
	}
	res.Done = stopped || seen < r.Limit
	if len(ids) == 0 {
		return res, nil
	}
	out, err := s.db.ExecContext(qctx, "DELETE FROM wallet_outbox WHERE event_id IN ("+placeholders(len(ids))+") AND id <= ? AND created_at_ms < ?",
		append(ids, bound, r.CutoffMs)...)
	if err != nil {
		return res, s.wrap("purge wallet_outbox", err)
	}
	n, _ := out.RowsAffected()
	res.Rows = int(n)
	return res, nil
}

// CountPurgeable implements persistence.Purger.
func (s *WalletStore) CountPurgeable(ctx context.Context, r persistence.PurgeRequest) (int64, error) {
	if err := checkPurge(r, false, s.PurgeTables()...); err != nil {
		return 0, err
	}
	qctx, cancel, err := s.purgeDB().ctx(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	bound, ok, err := s.walletBound(qctx, r.Consumer)
	if err != nil || !ok {
		return 0, err
	}
	return s.purgeDB().count(ctx, "count wallet_outbox", "SELECT 1 FROM wallet_outbox WHERE id <= ? AND created_at_ms < ? LIMIT ?", bound, r.CutoffMs, r.Limit)
}

// TableRetention implements persistence.Purger (oldest row: the
// per-status minimum of idx_wallet_outbox_status_created).
func (s *WalletStore) TableRetention(ctx context.Context, table string) (persistence.TableRetention, error) {
	if table != persistence.PurgeWalletOutbox {
		return persistence.TableRetention{}, fmt.Errorf("mysql: this store does not hold %q", table)
	}
	return s.purgeDB().retention(ctx, table, "SELECT MIN(m) FROM (SELECT MIN(created_at_ms) AS m FROM wallet_outbox GROUP BY status) t")
}

// ---- notice store: notice_delivery_events ----

func (s *NoticeStore) purgeDB() purgeDB { return purgeDB{db: s.db, timeout: s.timeout, wrap: s.wrap} }

// PurgeTables implements persistence.Purger.
func (s *NoticeStore) PurgeTables() []string { return []string{persistence.PurgeNoticeDelivery} }

// AcquirePurgeLease implements persistence.Purger with GET_LOCK.
func (s *NoticeStore) AcquirePurgeLease(ctx context.Context, table, owner string, _, _ int64) (persistence.PurgeLease, bool, error) {
	if s.closed.Load() {
		return nil, false, errNoticeClosed
	}
	return s.purgeDB().acquire(ctx, table, owner)
}

// Purge implements persistence.Purger: per source, the oldest delivered
// rows of idx_notice_due (for a delivered row next_retry_at_ms is when it
// was delivered), deleted in one DELETE ... ORDER BY ... LIMIT whose every
// scanned row matches. Failed rows are never touched.
func (s *NoticeStore) Purge(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	res := persistence.PurgeResult{Done: true}
	if err := checkPurge(r, true, s.PurgeTables()...); err != nil {
		return res, err
	}
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return res, err
	}
	defer cancel()
	sources, err := s.deliveredSources(ctx)
	if err != nil {
		return res, err
	}
	for _, src := range sources {
		budget := r.Limit - res.Rows
		if budget <= 0 {
			res.Done = false
			break
		}
		out, err := s.db.ExecContext(ctx, "DELETE FROM notice_delivery_events WHERE status = ? AND source_name = ? AND next_retry_at_ms < ?"+
			" ORDER BY next_retry_at_ms LIMIT ?", persistence.NoticeDelivered, src, r.CutoffMs, budget)
		if err != nil {
			return res, s.wrap("purge notice_delivery_events", err)
		}
		n, _ := out.RowsAffected()
		res.Rows += int(n)
		if int(n) == budget {
			res.Done = false
		}
	}
	return res, nil
}

// deliveredSources lists the sources with delivered rows (a loose scan of
// idx_notice_due: one entry per source).
func (s *NoticeStore) deliveredSources(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT DISTINCT source_name FROM notice_delivery_events WHERE status = ?", persistence.NoticeDelivered)
	if err != nil {
		return nil, s.wrap("purge notice_delivery_events", err)
	}
	var out []string
	for rows.Next() {
		var src string
		if err := rows.Scan(&src); err != nil {
			rows.Close()
			return nil, s.wrap("purge notice_delivery_events", err)
		}
		out = append(out, src)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, s.wrap("purge notice_delivery_events", err)
	}
	return out, nil
}

// CountPurgeable implements persistence.Purger.
func (s *NoticeStore) CountPurgeable(ctx context.Context, r persistence.PurgeRequest) (int64, error) {
	if err := checkPurge(r, false, s.PurgeTables()...); err != nil {
		return 0, err
	}
	if s.closed.Load() {
		return 0, errNoticeClosed
	}
	return s.purgeDB().count(ctx, "count notice_delivery_events", "SELECT 1 FROM notice_delivery_events"+
		" WHERE status = ? AND next_retry_at_ms < ? LIMIT ?", persistence.NoticeDelivered, r.CutoffMs, r.Limit)
}

// TableRetention implements persistence.Purger. The age comes from
// idx_notice_due (per status and source, the smallest next_retry_at_ms:
// for delivered and failed rows when they got there, for open rows when
// they are due), so it needs no scan of the table.
func (s *NoticeStore) TableRetention(ctx context.Context, table string) (persistence.TableRetention, error) {
	if table != persistence.PurgeNoticeDelivery {
		return persistence.TableRetention{}, fmt.Errorf("mysql: this store does not hold %q", table)
	}
	if s.closed.Load() {
		return persistence.TableRetention{}, errNoticeClosed
	}
	return s.purgeDB().retention(ctx, table, "SELECT MIN(m) FROM (SELECT MIN(next_retry_at_ms) AS m FROM notice_delivery_events"+
		" GROUP BY status, source_name) t")
}

// ConsumerPosition implements persistence.ConsumerPositions: a plain read
// of notice_source_cursors that leaves the scan lease alone.
func (s *NoticeStore) ConsumerPosition(ctx context.Context, source string) (persistence.ConsumerPosition, error) {
	ctx, cancel, err := s.begin(ctx)
	if err != nil {
		return persistence.ConsumerPosition{}, err
	}
	defer cancel()
	var p persistence.ConsumerPosition
	err = s.db.QueryRowContext(ctx, "SELECT position_num, position_key FROM notice_source_cursors WHERE source_name = ?", source).Scan(&p.Num, &p.Key)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.ConsumerPosition{}, nil
	}
	if err != nil {
		return persistence.ConsumerPosition{}, s.wrap("read cursor "+source, err)
	}
	p.Found = true
	return p, nil
}
