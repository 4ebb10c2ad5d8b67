package memdb

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-memdb"

	"github.com/hyapp/roomcell/persistence"
)

// The dev stores apply the retention rules of persistence.PurgeRequest so a
// --dev node can run for weeks. Each batch is one write transaction
// (go-memdb's single writer) or, for the log and outbox, runs under the
// table's write lock, which an append takes to store its rows: a batch
// and a room append never interleave.

var (
	_ persistence.Purger            = (*Store)(nil)
	_ persistence.Purger            = (*WalletStore)(nil)
	_ persistence.Purger            = (*NoticeStore)(nil)
	_ persistence.ConsumerPositions = (*NoticeStore)(nil)
)

// purgeLeases is the in-process purge lease of one store: a go-memdb store
// lives in one process, so a map under a mutex is the whole lease.
type purgeLeases struct {
	mu     sync.Mutex
	byName map[string]purgeHolder
}

type purgeHolder struct {
	owner   string
	untilMs int64
	token   uint64
}

var leaseTokens struct {
	sync.Mutex
	next uint64
}

type memLease struct {
	l     *purgeLeases
	table string
	token uint64
	once  sync.Once
}

func (m *memLease) Release() {
	m.once.Do(func() {
		m.l.mu.Lock()
		defer m.l.mu.Unlock()
		if h, ok := m.l.byName[m.table]; ok && h.token == m.token {
			delete(m.l.byName, m.table)
		}
	})
}

func (l *purgeLeases) acquire(table, owner string, nowMs, ttlMs int64) (persistence.PurgeLease, bool, error) {
	if !persistence.IsPurgeTable(table) || owner == "" || ttlMs <= 0 {
		return nil, false, fmt.Errorf("memdb: purge lease needs a purge table, an owner and a ttl (table %q)", table)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byName == nil {
		l.byName = map[string]purgeHolder{}
	}
	if h, ok := l.byName[table]; ok && h.owner != owner && h.untilMs > nowMs {
		return nil, false, nil
	}
	leaseTokens.Lock()
	leaseTokens.next++
	token := leaseTokens.next
	leaseTokens.Unlock()
	l.byName[table] = purgeHolder{owner: owner, untilMs: nowMs + ttlMs, token: token}
	return &memLease{l: l, table: table, token: token}, true, nil
}

func checkTable(r persistence.PurgeRequest, have ...string) error {
	for _, t := range have {
		if r.Table == t {
			return nil
		}
	}
	return fmt.Errorf("memdb: this store does not hold %q (has %v)", r.Table, have)
}

// memPurge runs a table's collect function in one transaction: a write
// transaction that deletes what it collected, or a read one for a dry run.
type memPurge struct {
	ready  func(context.Context) error
	db     *memdb.MemDB
	tables []string
}

// collectFunc returns the rows a batch would delete (table rows as
// stored) and where the walk stands (Rows is filled in by memPurge).
type collectFunc func(txn *memdb.Txn, r persistence.PurgeRequest) ([]any, persistence.PurgeResult, error)

func (m memPurge) purge(ctx context.Context, r persistence.PurgeRequest, table string, collect collectFunc) (persistence.PurgeResult, error) {
	if err := m.check(ctx, r, true); err != nil {
		return persistence.PurgeResult{}, err
	}
	txn := m.db.Txn(true)
	defer txn.Abort()
	doomed, res, err := collect(txn, r)
	if err != nil {
		return persistence.PurgeResult{}, err
	}
	for _, row := range doomed {
		if err := txn.Delete(table, row); err != nil {
			return persistence.PurgeResult{}, fmt.Errorf("memdb: purge %s: %w", table, err)
		}
	}
	txn.Commit()
	res.Rows = len(doomed)
	return res, nil
}

func (m memPurge) count(ctx context.Context, r persistence.PurgeRequest, collect collectFunc) (int64, error) {
	if err := m.check(ctx, r, false); err != nil {
		return 0, err
	}
	r.After = ""
	doomed, _, err := collect(m.db.Txn(false), r)
	return int64(len(doomed)), err
}

func (m memPurge) check(ctx context.Context, r persistence.PurgeRequest, batch bool) error {
	if err := m.ready(ctx); err != nil {
		return err
	}
	err := r.Validate()
	if batch {
		err = r.ValidateBatch()
	}
	if err != nil {
		return err
	}
	return checkTable(r, m.tables...)
}

// ---- room store: room_outbox and room_command_log ----

// PurgeTables implements persistence.Purger.
func (s *Store) PurgeTables() []string {
	return []string{persistence.PurgeRoomOutbox, persistence.PurgeCommandLog}
}

func (s *Store) memPurge() memPurge {
	return memPurge{ready: s.ready, db: s.db, tables: s.PurgeTables()}
}

// AcquirePurgeLease implements persistence.Purger.
func (s *Store) AcquirePurgeLease(ctx context.Context, table, owner string, nowMs, ttlMs int64) (persistence.PurgeLease, bool, error) {
	if err := s.ready(ctx); err != nil {
		return nil, false, err
	}
	return s.leases.acquire(table, owner, nowMs, ttlMs)
}

// Purge implements persistence.Purger. Neither table is a go-memdb
// table: a batch is collected and deleted under the table's write lock.
func (s *Store) Purge(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	if err := s.memPurge().check(ctx, r, true); err != nil {
		return persistence.PurgeResult{}, err
	}
	if r.Table == persistence.PurgeCommandLog {
		s.log.mu.Lock()
		defer s.log.mu.Unlock()
		doomed, res, err := s.log.purgeable(s.db.Txn(false), r)
		if err != nil {
			return persistence.PurgeResult{}, err
		}
		s.log.remove(doomed)
		res.Rows = len(doomed)
		return res, nil
	}
	s.outbox.mu.Lock()
	defer s.outbox.mu.Unlock()
	doomed, res, err := s.outbox.purgeable(r)
	if err != nil {
		return persistence.PurgeResult{}, err
	}
	for _, e := range doomed {
		s.outbox.remove(e)
	}
	res.Rows = len(doomed)
	return res, nil
}

// CountPurgeable implements persistence.Purger.
func (s *Store) CountPurgeable(ctx context.Context, r persistence.PurgeRequest) (int64, error) {
	if err := s.memPurge().check(ctx, r, false); err != nil {
		return 0, err
	}
	r.After = ""
	if r.Table == persistence.PurgeCommandLog {
		s.log.mu.RLock()
		defer s.log.mu.RUnlock()
		doomed, _, err := s.log.purgeable(s.db.Txn(false), r)
		return int64(len(doomed)), err
	}
	s.outbox.mu.RLock()
	defer s.outbox.mu.RUnlock()
	doomed, _, err := s.outbox.purgeable(r)
	return int64(len(doomed)), err
}

// purgeable walks the published rows oldest first up to the cutoff and
// returns those a batch deletes; After is the last row looked at,
// "<created_ms>/<id>". Callers hold mu.
func (t *outboxTable) purgeable(r persistence.PurgeRequest) ([]*outboxEntry, persistence.PurgeResult, error) {
	var res persistence.PurgeResult
	afterMs, afterID, err := persistence.ParseOutboxToken(r.After)
	if err != nil {
		return nil, res, err
	}
	var doomed []*outboxEntry
	res.Done = true
	t.scanStatus(persistence.OutboxPublished, afterMs, afterID, func(e *outboxEntry) bool {
		if e.CreatedAtMs >= r.CutoffMs {
			return false
		}
		if r.After != "" && e.CreatedAtMs == afterMs && e.EventID == afterID {
			return true
		}
		if len(doomed) == r.Limit {
			res.Done = false
			return false
		}
		res.Next = persistence.OutboxToken(e.CreatedAtMs, e.EventID)
		if persistence.OutboxRowPurgeable(e.row(), r) {
			doomed = append(doomed, e)
		}
		return true
	})
	return doomed, res, nil
}

// purgeable walks the rooms that have a snapshot (the snapshot table in
// key order, read in txn) and in each the log rows from its start up to
// the snapshot's seq, stopping in a room at its first row inside the
// window; it returns the rows a batch deletes. After
// is the last row looked at, "<app>\x00<room>\x00<seq>". Callers hold mu.
func (l *commandLog) purgeable(txn *memdb.Txn, r persistence.PurgeRequest) ([]*persistence.CommandRecord, persistence.PurgeResult, error) {
	var res persistence.PurgeResult
	after, afterSeq, err := persistence.ParseLogToken(r.After)
	if err != nil {
		return nil, res, err
	}
	snaps, err := txn.LowerBound(tableSnapshots, indexID, after.AppCode, after.RoomID)
	if err != nil {
		return nil, res, fmt.Errorf("memdb: purge room_command_log: %w", err)
	}
	var doomed []*persistence.CommandRecord
	for raw := snaps.Next(); raw != nil; raw = snaps.Next() {
		snap := raw.(*persistence.Snapshot)
		key := snap.Key()
		recs := l.rooms[key]
		if r.After != "" && key == after {
			recs = l.after(key, afterSeq)
		}
		for _, c := range recs {
			if c.Seq > snap.Seq || c.CreatedAtMs >= r.CutoffMs {
				break
			}
			if len(doomed) == r.Limit {
				return doomed, res, nil
			}
			doomed = append(doomed, c)
			res.Next = persistence.LogToken(key, c.Seq)
		}
	}
	res.Done = true
	return doomed, res, nil
}

// TableRetention implements persistence.Purger.
func (s *Store) TableRetention(ctx context.Context, table string) (persistence.TableRetention, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.TableRetention{}, err
	}
	out := persistence.TableRetention{Table: table}
	switch table {
	case persistence.PurgeRoomOutbox:
		s.outbox.mu.RLock()
		defer s.outbox.mu.RUnlock()
		for _, e := range s.outbox.byID {
			out.RowEstimate++
			out.OldestCreatedAtMs = oldest(out.OldestCreatedAtMs, e.CreatedAtMs)
		}
		return out, nil
	case persistence.PurgeCommandLog:
		s.log.mu.RLock()
		defer s.log.mu.RUnlock()
		for _, recs := range s.log.rooms {
			for _, c := range recs {
				out.RowEstimate++
				out.OldestCreatedAtMs = oldest(out.OldestCreatedAtMs, c.CreatedAtMs)
			}
		}
		return out, nil
	}
	return out, fmt.Errorf("memdb: this store does not hold %q", table)
}

func scanAll(txn *memdb.Txn, table string, fn func(any)) error {
	it, err := txn.Get(table, indexID)
	if err != nil {
		return fmt.Errorf("memdb: scan %s: %w", table, err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		fn(raw)
	}
	return nil
}

func oldest(cur, ms int64) int64 {
	if cur == 0 || ms < cur {
		return ms
	}
	return cur
}

// ---- wallet store: wallet_outbox ----

// PurgeTables implements persistence.Purger.
func (s *WalletStore) PurgeTables() []string { return []string{persistence.PurgeWalletOutbox} }

// AcquirePurgeLease implements persistence.Purger.
func (s *WalletStore) AcquirePurgeLease(ctx context.Context, table, owner string, nowMs, ttlMs int64) (persistence.PurgeLease, bool, error) {
	if err := s.ready(ctx); err != nil {
		return nil, false, err
	}
	return s.leases.acquire(table, owner, nowMs, ttlMs)
}

func (s *WalletStore) memPurge() memPurge {
	return memPurge{ready: s.ready, db: s.db, tables: s.PurgeTables()}
}

// Purge implements persistence.Purger.
func (s *WalletStore) Purge(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	return s.memPurge().purge(ctx, r, tableWalletOutbox, walletPurgeable)
}

// CountPurgeable implements persistence.Purger.
func (s *WalletStore) CountPurgeable(ctx context.Context, r persistence.PurgeRequest) (int64, error) {
	return s.memPurge().count(ctx, r, walletPurgeable)
}

// walletPurgeable walks wallet_outbox by id from its start and stops at the
// first row the notice cursor has not passed, that is inside the window or
// that is the newest row (the next id is the newest plus one: deleting it
// would hand its id out again, behind the cursor).
func walletPurgeable(txn *memdb.Txn, r persistence.PurgeRequest) ([]any, persistence.PurgeResult, error) {
	done := persistence.PurgeResult{Done: true}
	last, err := txn.Last(tableWalletOutbox, indexID)
	if err != nil || last == nil {
		return nil, done, err
	}
	newest := last.(*persistence.WalletOutboxRecord).ID
	it, err := txn.Get(tableWalletOutbox, indexID)
	if err != nil {
		return nil, done, fmt.Errorf("memdb: purge wallet_outbox: %w", err)
	}
	var doomed []any
	for raw := it.Next(); raw != nil; raw = it.Next() {
		o := raw.(*persistence.WalletOutboxRecord)
		if o.ID >= newest || !r.Consumer.Found || o.ID > r.Consumer.Num || o.CreatedAtMs >= r.CutoffMs {
			break
		}
		if len(doomed) == r.Limit {
			return doomed, persistence.PurgeResult{}, nil
		}
		doomed = append(doomed, o)
	}
	return doomed, done, nil
}

// TableRetention implements persistence.Purger.
func (s *WalletStore) TableRetention(ctx context.Context, table string) (persistence.TableRetention, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.TableRetention{}, err
	}
	if table != persistence.PurgeWalletOutbox {
		return persistence.TableRetention{}, fmt.Errorf("memdb: this store does not hold %q", table)
	}
	out := persistence.TableRetention{Table: table}
	return out, scanAll(s.db.Txn(false), tableWalletOutbox, func(raw any) {
		out.RowEstimate++
		out.OldestCreatedAtMs = oldest(out.OldestCreatedAtMs, raw.(*persistence.WalletOutboxRecord).CreatedAtMs)
	})
}

// ---- notice store: notice_delivery_events ----

// PurgeTables implements persistence.Purger.
func (s *NoticeStore) PurgeTables() []string { return []string{persistence.PurgeNoticeDelivery} }

// AcquirePurgeLease implements persistence.Purger.
func (s *NoticeStore) AcquirePurgeLease(ctx context.Context, table, owner string, nowMs, ttlMs int64) (persistence.PurgeLease, bool, error) {
	if err := s.ready(ctx); err != nil {
		return nil, false, err
	}
	return s.leases.acquire(table, owner, nowMs, ttlMs)
}

func (s *NoticeStore) memPurge() memPurge {
	return memPurge{ready: s.ready, db: s.db, tables: s.PurgeTables()}
}

// Purge implements persistence.Purger.
func (s *NoticeStore) Purge(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	return s.memPurge().purge(ctx, r, tableNoticeDeliveries, noticesPurgeable)
}

// CountPurgeable implements persistence.Purger.
func (s *NoticeStore) CountPurgeable(ctx context.Context, r persistence.PurgeRequest) (int64, error) {
	return s.memPurge().count(ctx, r, noticesPurgeable)
}

// noticesPurgeable reads the delivered rows by (source, next_retry_at_ms),
// which for a delivered row is when it was delivered; failed rows are in
// another part of the index and never read.
func noticesPurgeable(txn *memdb.Txn, r persistence.PurgeRequest) ([]any, persistence.PurgeResult, error) {
	it, err := txn.Get(tableNoticeDeliveries, indexNoticeDue+"_prefix", persistence.NoticeDelivered)
	if err != nil {
		return nil, persistence.PurgeResult{}, fmt.Errorf("memdb: purge notice_delivery_events: %w", err)
	}
	var doomed []any
	for raw := it.Next(); raw != nil; raw = it.Next() {
		e := raw.(*noticeEntry)
		if e.Status != persistence.NoticeDelivered || e.NextRetryAtMs >= r.CutoffMs {
			continue // the next source's rows may still be old
		}
		if len(doomed) == r.Limit {
			return doomed, persistence.PurgeResult{}, nil
		}
		doomed = append(doomed, e)
	}
	return doomed, persistence.PurgeResult{Done: true}, nil
}

// TableRetention implements persistence.Purger.
func (s *NoticeStore) TableRetention(ctx context.Context, table string) (persistence.TableRetention, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.TableRetention{}, err
	}
	if table != persistence.PurgeNoticeDelivery {
		return persistence.TableRetention{}, fmt.Errorf("memdb: this store does not hold %q", table)
	}
	out := persistence.TableRetention{Table: table}
	return out, scanAll(s.db.Txn(false), tableNoticeDeliveries, func(raw any) {
		out.RowEstimate++
		out.OldestCreatedAtMs = oldest(out.OldestCreatedAtMs, raw.(*noticeEntry).Row.CreatedAtMs)
	})
}

// ConsumerPosition implements persistence.ConsumerPositions: a read of the
// cursor that leaves its lease alone.
func (s *NoticeStore) ConsumerPosition(ctx context.Context, source string) (persistence.ConsumerPosition, error) {
	if err := s.ready(ctx); err != nil {
		return persistence.ConsumerPosition{}, err
	}
	raw, err := s.db.Txn(false).First(tableNoticeCursors, indexID, source)
	if err != nil {
		return persistence.ConsumerPosition{}, fmt.Errorf("memdb: read cursor %s: %w", source, err)
	}
	if raw == nil {
		return persistence.ConsumerPosition{}, nil
	}
	c := raw.(*noticeCursor).Cursor
	return persistence.ConsumerPosition{Num: c.Num, Key: c.Key, Found: true}, nil
}
