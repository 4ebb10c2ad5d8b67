package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// WalletSchema is the name of the wallet store's embedded schema
// (schema/wallet/*.sql).
const WalletSchema = "wallet"

// walletMaxAttempts bounds the retries of a transaction the server chose
// as a deadlock victim or whose lock wait timed out.
const walletMaxAttempts = 8

// WalletStore is the MySQL wallet store in cfg.WalletDatabase. Exec is one
// InnoDB transaction: it locks the accounts (and the VIP row) it changes
// with INSERT ... ON DUPLICATE KEY UPDATE in AccountKey order, which both
// creates a missing account and takes its exclusive lock, so two
// transactions of one user queue on the row and never both read the old
// balance, across any number of processes. It is safe for concurrent use.
type WalletStore struct {
	pool
}

var _ persistence.WalletStore = (*WalletStore)(nil)

// OpenWalletStore connects to cfg's server, applies the wallet schema to
// cfg.WalletDatabase when cfg.AutoMigrate is set, and returns the store.
// Zero fields of cfg take configs' defaults; an empty DSN is read from
// $ROOMCELL_MYSQL_DSN. No error or log line carries the password.
func OpenWalletStore(ctx context.Context, cfg configs.MySQLConfig, opts ...Option) (*WalletStore, error) {
	o := options{log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	cfg = withDefaults(cfg)
	if cfg.AutoMigrate {
		if err := MigrateConfig(ctx, cfg, WalletSchema, cfg.WalletDatabase); err != nil {
			return nil, err
		}
	}
	db, err := openDB(ctx, cfg, cfg.WalletDatabase, cfg.QueryTimeout, o.log)
	if err != nil {
		return nil, err
	}
	if !cfg.AutoMigrate {
		if err := refuseAhead(ctx, db, WalletSchema, cfg.WalletDatabase, o.log); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	s := NewWalletStore(db, cfg.QueryTimeout, o.log)
	s.dsn, s.ownDB = cfg.DSN, true
	return s, nil
}

// NewWalletStore wraps an open pool whose default database holds the
// wallet schema (tests: mysqltest). queryTimeout bounds one transaction
// (default 3s). Close does not close db.
func NewWalletStore(db *sql.DB, queryTimeout time.Duration, log *slog.Logger) *WalletStore {
	return &WalletStore{pool: newStorePool(db, queryTimeout, log, "wallet")}
}

func (s *WalletStore) wrap(op string, err error) error { return wrapErr(op, s.dsn, err) }

var errWalletClosed = fmt.Errorf("mysql: wallet store closed: %w", persistence.ErrUnavailable)

// Exec implements persistence.WalletStore. A deadlock or lock-wait timeout rolls the
// attempt back and runs it again (Decide included) up to walletMaxAttempts
// times within ctx.
func (s *WalletStore) Exec(ctx context.Context, tx persistence.WalletTx) (persistence.WalletReceipt, error) {
	if tx.AppCode == "" || tx.CommandID == "" || tx.Decide == nil {
		return persistence.WalletReceipt{}, errors.New("mysql: wallet tx needs app_code, command_id and Decide")
	}
	if s.closed.Load() {
		return persistence.WalletReceipt{}, errWalletClosed
	}
	for attempt := 1; ; attempt++ {
		rc, err := s.execOnce(ctx, tx)
		if err == nil {
			return rc, nil
		}
		if errors.Is(err, errWalletDuplicate) {
			// Another transaction committed this command_id between our
			// check and our insert (it locked other accounts, or none).
			rec, ferr := s.Transaction(ctx, tx.AppCode, tx.CommandID)
			if ferr != nil {
				return persistence.WalletReceipt{}, ferr
			}
			return persistence.WalletReceipt{Record: rec, Duplicate: true}, nil
		}
		if !isDeadlock(err) || attempt >= walletMaxAttempts || ctx.Err() != nil {
			return persistence.WalletReceipt{}, err
		}
		s.log.Debug("wallet transaction retried", "app_code", tx.AppCode, "command_id", tx.CommandID, "attempt", attempt, "err", err)
		backoff := time.Duration(rand.Int64N(int64(attempt) * int64(2*time.Millisecond)))
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return persistence.WalletReceipt{}, s.wrap("wallet exec", ctx.Err())
		}
	}
}

var errWalletDuplicate = errors.New("command_id committed concurrently")

func (s *WalletStore) execOnce(ctx context.Context, tx persistence.WalletTx) (persistence.WalletReceipt, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	sqlTx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return persistence.WalletReceipt{}, s.wrap("wallet begin", err)
	}
	defer func() { _ = sqlTx.Rollback() }()

	keys := persistence.SortedAccountKeys(tx.Lock)
	view := persistence.WalletView{Accounts: make(map[persistence.AccountKey]persistence.Account, len(keys))}
	// The nowMs of a created account is only its created_at_ms: the row
	// is rolled back unless the plan changes it, and then it is rewritten.
	nowMs := time.Now().UnixMilli()
	if len(keys) > 0 {
		if err := s.lockAccounts(ctx, sqlTx, keys, nowMs, view.Accounts); err != nil {
			return persistence.WalletReceipt{}, err
		}
	}
	if tx.LockVip != "" {
		v, err := s.lockVip(ctx, sqlTx, tx.AppCode, tx.LockVip, nowMs)
		if err != nil {
			return persistence.WalletReceipt{}, err
		}
		view.Vip = v
	}
	// Checked after the locks: a transaction of the same command_id that
	// held them has committed by now, and READ COMMITTED shows it.
	rec, err := findWalletTx(ctx, sqlTx, tx.AppCode, tx.CommandID)
	switch {
	case err == nil:
		return persistence.WalletReceipt{Record: rec, Duplicate: true}, nil
	case !errors.Is(err, persistence.ErrNotFound):
		return persistence.WalletReceipt{}, s.wrap("wallet read transaction", err)
	}

	plan, err := tx.Decide(view)
	if err != nil {
		return persistence.WalletReceipt{}, err
	}
	if err := persistence.CheckWalletPlan(tx, view, plan); err != nil {
		return persistence.WalletReceipt{}, err
	}
	r := plan.Record
	if _, err := sqlTx.ExecContext(ctx,
		`INSERT INTO wallet_transactions (transaction_id, app_code, command_id, kind, fingerprint, result, created_at_ms)
		 VALUES (?, ?, ?, ?, ?, ?, ?)`,
		r.TransactionID, r.AppCode, r.CommandID, r.Kind, r.Fingerprint, string(r.Result), r.CreatedAtMs); err != nil {
		if classify(err) == persistence.ErrConflict {
			return persistence.WalletReceipt{}, errWalletDuplicate
		}
		return persistence.WalletReceipt{}, s.wrap("wallet insert transaction", err)
	}
	if err := s.writeAccounts(ctx, sqlTx, view, plan); err != nil {
		return persistence.WalletReceipt{}, err
	}
	if plan.Vip != nil {
		v := plan.Vip
		if _, err := sqlTx.ExecContext(ctx,
			`UPDATE wallet_vip SET level = ?, started_at_ms = ?, expires_at_ms = ?, updated_at_ms = ?
			 WHERE app_code = ? AND user_id = ?`,
			v.Level, v.StartedAtMs, v.ExpiresAtMs, plan.NowMs, v.AppCode, v.UserID); err != nil {
			return persistence.WalletReceipt{}, s.wrap("wallet write vip", err)
		}
	}
	if h := plan.Hold; h != nil {
		if _, err := sqlTx.ExecContext(ctx, upsertGiftHold, h.AppCode, h.CommandID, h.TransactionID, h.RoomID,
			h.FromUserID, h.ToUserID, h.GiftID, h.Count, h.PriceTotal, h.DiamondTotal, h.HeatValue,
			h.State, h.SettleTransactionID, h.CreatedAtMs, h.UpdatedAtMs); err != nil {
			return persistence.WalletReceipt{}, s.wrap("wallet write gift hold", err)
		}
	}
	if len(plan.Outbox) > 0 {
		q := strings.Builder{}
		q.WriteString(`INSERT INTO wallet_outbox (event_id, app_code, user_id, event_type, payload, status, created_at_ms, updated_at_ms) VALUES `)
		args := make([]any, 0, 8*len(plan.Outbox))
		for i, o := range plan.Outbox {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, o.EventID, o.AppCode, o.UserID, o.EventType, string(o.Payload), persistence.OutboxPending, plan.NowMs, plan.NowMs)
		}
		if _, err := sqlTx.ExecContext(ctx, q.String(), args...); err != nil {
			return persistence.WalletReceipt{}, s.wrap("wallet insert outbox", err)
		}
	}
	if err := sqlTx.Commit(); err != nil {
		// The outcome is unknown: ErrUnavailable tells the caller to
		// retry with the same command_id, which finds the commit if any.
		return persistence.WalletReceipt{}, s.wrap("wallet commit", err)
	}
	return persistence.WalletReceipt{Record: r}, nil
}

// lockAccounts creates missing accounts at zero and takes the exclusive
// lock of every key, in the order given (sorted by the caller): one
// multi-row upsert locks row by row in VALUES order. Then it reads them.
func (s *WalletStore) lockAccounts(ctx context.Context, tx *sql.Tx, keys []persistence.AccountKey, nowMs int64, into map[persistence.AccountKey]persistence.Account) error {
	ins := strings.Builder{}
	ins.WriteString(`INSERT INTO wallet_accounts (app_code, user_id, asset_type, available, frozen, balance_version, created_at_ms, updated_at_ms) VALUES `)
	sel := strings.Builder{}
	sel.WriteString(`SELECT app_code, user_id, asset_type, available, frozen, balance_version, updated_at_ms
		FROM wallet_accounts WHERE `)
	insArgs := make([]any, 0, 5*len(keys))
	selArgs := make([]any, 0, 3*len(keys))
	for i, k := range keys {
		if i > 0 {
			ins.WriteString(", ")
			sel.WriteString(" OR ")
		}
		ins.WriteString("(?, ?, ?, 0, 0, 0, ?, ?)")
		insArgs = append(insArgs, k.AppCode, k.UserID, k.AssetType, nowMs, nowMs)
		sel.WriteString("(app_code = ? AND user_id = ? AND asset_type = ?)")
		selArgs = append(selArgs, k.AppCode, k.UserID, k.AssetType)
	}
	// A no-op update still takes the row's exclusive lock.
	ins.WriteString(` ON DUPLICATE KEY UPDATE balance_version = balance_version`)
	sel.WriteString(" FOR UPDATE")
	if _, err := tx.ExecContext(ctx, ins.String(), insArgs...); err != nil {
		return s.wrap("wallet lock accounts", err)
	}
	rows, err := tx.QueryContext(ctx, sel.String(), selArgs...)
	if err != nil {
		return s.wrap("wallet read accounts", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a persistence.Account
		if err := rows.Scan(&a.AppCode, &a.UserID, &a.AssetType, &a.Available, &a.Frozen, &a.BalanceVersion, &a.UpdatedAtMs); err != nil {
			return s.wrap("wallet read accounts", err)
		}
		into[a.Key()] = a
	}
	if err := rows.Err(); err != nil {
		return s.wrap("wallet read accounts", err)
	}
	if len(into) != len(keys) {
		return fmt.Errorf("mysql: locked %d wallet accounts, read %d", len(keys), len(into))
	}
	return nil
}

func (s *WalletStore) lockVip(ctx context.Context, tx *sql.Tx, appCode, userID string, nowMs int64) (persistence.Vip, error) {
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO wallet_vip (app_code, user_id, level, started_at_ms, expires_at_ms, created_at_ms, updated_at_ms)
		 VALUES (?, ?, 0, 0, 0, ?, ?) ON DUPLICATE KEY UPDATE level = level`,
		appCode, userID, nowMs, nowMs); err != nil {
		return persistence.Vip{}, s.wrap("wallet lock vip", err)
	}
	v, err := scanVip(tx.QueryRowContext(ctx,
		`SELECT app_code, user_id, level, started_at_ms, expires_at_ms, updated_at_ms
		 FROM wallet_vip WHERE app_code = ? AND user_id = ? FOR UPDATE`, appCode, userID))
	if err != nil {
		return persistence.Vip{}, s.wrap("wallet read vip", err)
	}
	if v.Level == 0 && v.ExpiresAtMs == 0 {
		// The row the lock just created: to Decide it is "no VIP yet",
		// the same zero value go-memdb hands over.
		v.UpdatedAtMs = 0
	}
	return v, nil
}

// writeAccounts stores the plan's new balances. The version in WHERE is
// belt and braces: under the row lock it always matches.
func (s *WalletStore) writeAccounts(ctx context.Context, tx *sql.Tx, view persistence.WalletView, plan persistence.WalletPlan) error {
	for _, a := range plan.Accounts {
		old := view.Accounts[a.Key()]
		res, err := tx.ExecContext(ctx,
			`UPDATE wallet_accounts SET available = ?, frozen = ?, balance_version = ?, updated_at_ms = ?
			 WHERE app_code = ? AND user_id = ? AND asset_type = ? AND balance_version = ?`,
			a.Available, a.Frozen, a.BalanceVersion, plan.NowMs, a.AppCode, a.UserID, a.AssetType, old.BalanceVersion)
		if err != nil {
			return s.wrap("wallet write account", err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("mysql: wallet account %s changed under its lock (%d rows, %v)", a.Key(), n, err)
		}
	}
	if len(plan.Ledger) == 0 {
		return nil
	}
	q := strings.Builder{}
	q.WriteString(`INSERT INTO wallet_ledger (transaction_id, command_id, app_code, user_id, asset_type,
		available_delta, frozen_delta, available_after, frozen_after, balance_version, created_at_ms) VALUES `)
	args := make([]any, 0, 11*len(plan.Ledger))
	for i, e := range plan.Ledger {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, e.TransactionID, e.CommandID, e.AppCode, e.UserID, e.AssetType,
			e.AvailableDelta, e.FrozenDelta, e.AvailableAfter, e.FrozenAfter, e.BalanceVersion, e.CreatedAtMs)
	}
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return s.wrap("wallet insert ledger", err)
	}
	return nil
}

type rowScanner interface{ Scan(dest ...any) error }

func scanVip(r rowScanner) (persistence.Vip, error) {
	var v persistence.Vip
	err := r.Scan(&v.AppCode, &v.UserID, &v.Level, &v.StartedAtMs, &v.ExpiresAtMs, &v.UpdatedAtMs)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.Vip{}, persistence.ErrNotFound
	}
	return v, err
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func findWalletTx(ctx context.Context, q queryer, appCode, commandID string) (persistence.WalletTxRecord, error) {
	var r persistence.WalletTxRecord
	var result []byte
	err := q.QueryRowContext(ctx,
		`SELECT transaction_id, app_code, command_id, kind, fingerprint, result, created_at_ms
		 FROM wallet_transactions WHERE app_code = ? AND command_id = ?`, appCode, commandID).
		Scan(&r.TransactionID, &r.AppCode, &r.CommandID, &r.Kind, &r.Fingerprint, &result, &r.CreatedAtMs)
	if errors.Is(err, sql.ErrNoRows) {
		return persistence.WalletTxRecord{}, persistence.ErrNotFound
	}
	r.Result = result
	return r, err
}

func (s *WalletStore) queryCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// Transaction implements persistence.WalletStore.
func (s *WalletStore) Transaction(ctx context.Context, appCode, commandID string) (persistence.WalletTxRecord, error) {
	if s.closed.Load() {
		return persistence.WalletTxRecord{}, errWalletClosed
	}
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	r, err := findWalletTx(ctx, s.db, appCode, commandID)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return persistence.WalletTxRecord{}, s.wrap("wallet read transaction", err)
	}
	return r, err
}

// Accounts implements persistence.WalletStore.
func (s *WalletStore) Accounts(ctx context.Context, appCode, userID string) ([]persistence.Account, error) {
	if s.closed.Load() {
		return nil, errWalletClosed
	}
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx,
		`SELECT app_code, user_id, asset_type, available, frozen, balance_version, updated_at_ms
		 FROM wallet_accounts WHERE app_code = ? AND user_id = ? ORDER BY asset_type`, appCode, userID)
	if err != nil {
		return nil, s.wrap("wallet list accounts", err)
	}
	defer rows.Close()
	var out []persistence.Account
	for rows.Next() {
		var a persistence.Account
		if err := rows.Scan(&a.AppCode, &a.UserID, &a.AssetType, &a.Available, &a.Frozen, &a.BalanceVersion, &a.UpdatedAtMs); err != nil {
			return nil, s.wrap("wallet list accounts", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("wallet list accounts", err)
	}
	return out, nil
}

// Vip implements persistence.WalletStore. A row a refused purchase's lock created is
// rolled back with it, so every row here was written by a purchase.
func (s *WalletStore) Vip(ctx context.Context, appCode, userID string) (persistence.Vip, error) {
	if s.closed.Load() {
		return persistence.Vip{}, errWalletClosed
	}
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	v, err := scanVip(s.db.QueryRowContext(ctx,
		`SELECT app_code, user_id, level, started_at_ms, expires_at_ms, updated_at_ms
		 FROM wallet_vip WHERE app_code = ? AND user_id = ?`, appCode, userID))
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return persistence.Vip{}, s.wrap("wallet read vip", err)
	}
	return v, err
}

// Ledger implements persistence.WalletStore.
func (s *WalletStore) Ledger(ctx context.Context, k persistence.AccountKey) ([]persistence.LedgerEntry, error) {
	if s.closed.Load() {
		return nil, errWalletClosed
	}
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx,
		`SELECT transaction_id, command_id, app_code, user_id, asset_type, available_delta, frozen_delta,
		        available_after, frozen_after, balance_version, created_at_ms
		 FROM wallet_ledger WHERE app_code = ? AND user_id = ? AND asset_type = ?
		 ORDER BY balance_version`, k.AppCode, k.UserID, k.AssetType)
	if err != nil {
		return nil, s.wrap("wallet list ledger", err)
	}
	defer rows.Close()
	var out []persistence.LedgerEntry
	for rows.Next() {
		var e persistence.LedgerEntry
		if err := rows.Scan(&e.TransactionID, &e.CommandID, &e.AppCode, &e.UserID, &e.AssetType, &e.AvailableDelta,
			&e.FrozenDelta, &e.AvailableAfter, &e.FrozenAfter, &e.BalanceVersion, &e.CreatedAtMs); err != nil {
			return nil, s.wrap("wallet list ledger", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("wallet list ledger", err)
	}
	return out, nil
}

// ListOutboxAfter implements persistence.WalletStore (see its caveat on id order).
func (s *WalletStore) ListOutboxAfter(ctx context.Context, afterID int64, limit int) ([]persistence.WalletOutboxRecord, error) {
	if s.closed.Load() {
		return nil, errWalletClosed
	}
	if limit <= 0 {
		return nil, nil
	}
	ctx, cancel := s.queryCtx(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, event_id, app_code, user_id, event_type, payload, status, created_at_ms, updated_at_ms
		 FROM wallet_outbox WHERE id > ? ORDER BY id LIMIT ?`, afterID, limit)
	if err != nil {
		return nil, s.wrap("wallet scan outbox", err)
	}
	defer rows.Close()
	var out []persistence.WalletOutboxRecord
	for rows.Next() {
		var r persistence.WalletOutboxRecord
		var payload []byte
		if err := rows.Scan(&r.ID, &r.EventID, &r.AppCode, &r.UserID, &r.EventType, &payload, &r.Status, &r.CreatedAtMs, &r.UpdatedAtMs); err != nil {
			return nil, s.wrap("wallet scan outbox", err)
		}
		r.Payload = payload
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("wallet scan outbox", err)
	}
	return out, nil
}
