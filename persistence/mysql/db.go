package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	driverMySQL "github.com/go-sql-driver/mysql"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// EnvDSN is read when configs.MySQLConfig.DSN is empty, so a DSN with a
// password can stay out of every file.
const EnvDSN = "ROOMCELL_MYSQL_DSN"

// Session settings every connection of OpenDB gets, on MySQL 8 and MariaDB
// alike. READ COMMITTED: the stores only need unique keys and row locks;
// REPEATABLE READ's gap locks would make concurrent inserts and upserts of
// neighbouring rooms deadlock. The sql_mode is set outright so a server's
// non-strict default can never truncate a reply or an ID silently.
var sessionInit = []string{
	"SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
	"SET SESSION sql_mode = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
}

// withDefaults fills what configs.MySQLConfig.setDefaults would, for callers
// (tests, tools) that build the struct by hand.
func withDefaults(cfg configs.MySQLConfig) configs.MySQLConfig {
	if cfg.DSN == "" {
		cfg.DSN = os.Getenv(EnvDSN)
	}
	if cfg.RoomDatabase == "" {
		cfg.RoomDatabase = "hyapp_room"
	}
	if cfg.WalletDatabase == "" {
		cfg.WalletDatabase = "hyapp_wallet"
	}
	if cfg.NoticeDatabase == "" {
		cfg.NoticeDatabase = "hyapp_notice"
	}
	if cfg.MaxOpenConns <= 0 {
		cfg.MaxOpenConns = 32
	}
	if cfg.MaxIdleConns <= 0 {
		cfg.MaxIdleConns = min(16, cfg.MaxOpenConns)
	}
	if cfg.ConnMaxLifetime <= 0 {
		cfg.ConnMaxLifetime = 30 * time.Minute
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 3 * time.Second
	}
	if cfg.GroupCommit.MaxBatch <= 0 {
		cfg.GroupCommit.MaxBatch = 128
	}
	if cfg.GroupCommit.Linger <= 0 {
		cfg.GroupCommit.Linger = 2 * time.Millisecond
	}
	return cfg
}

// driverConfig parses dsn and points it at database ("" = none). The
// returned redacted form is the only one that may reach a log or an error.
func driverConfig(dsn, database string, dial, io time.Duration) (cfg *driverMySQL.Config, redacted string, err error) {
	if dsn == "" {
		return nil, "", fmt.Errorf("mysql: no DSN (set mysql.dsn or %s)", EnvDSN)
	}
	cfg, err = driverMySQL.ParseDSN(dsn)
	if err != nil {
		// The parser's message may quote a piece of the DSN, and the piece
		// may be the password: say only which DSN failed and scrub.
		return nil, "", fmt.Errorf("mysql: invalid DSN %s: %s", redactRaw(dsn), scrub(err.Error(), dsn))
	}
	if err := checkIdent(database, true); err != nil {
		return nil, "", err
	}
	cfg.DBName = database
	cfg.ParseTime = true
	// One round trip per statement instead of prepare+execute+close: the
	// stores send every value as a parameter, and the driver escapes them
	// for the connection's (safe, utf8mb4) charset.
	cfg.InterpolateParams = true
	cfg.Timeout = dial
	cfg.ReadTimeout = io
	cfg.WriteTimeout = io
	return cfg, redact(cfg), nil
}

// redactedDSN is dsn pointed at database with the password replaced, for
// log lines; "" when dsn does not parse.
func redactedDSN(dsn, database string) string {
	_, r, err := driverConfig(dsn, database, 0, 0)
	if err != nil {
		return ""
	}
	return r
}

// redact is the DSN with the password replaced.
func redact(cfg *driverMySQL.Config) string {
	c := cfg.Clone()
	if c.Passwd != "" {
		c.Passwd = "xxxxx"
	}
	return c.FormatDSN()
}

// redactRaw hides everything between the first ':' and the last '@' of a
// DSN that did not parse.
func redactRaw(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return "(unparsable DSN)"
	}
	user := dsn[:at]
	if i := strings.IndexByte(user, ':'); i >= 0 {
		user = user[:i] + ":xxxxx"
	}
	return user + dsn[at:]
}

// scrub removes the DSN's password from msg, whatever produced it.
func scrub(msg, dsn string) string {
	pw := ""
	if cfg, err := driverMySQL.ParseDSN(dsn); err == nil {
		pw = cfg.Passwd
	} else if at := strings.LastIndex(dsn, "@"); at >= 0 {
		if i := strings.IndexByte(dsn[:at], ':'); i >= 0 {
			pw = dsn[i+1 : at]
		}
	}
	if pw == "" {
		return msg
	}
	return strings.ReplaceAll(msg, pw, "xxxxx")
}

// checkIdent accepts the database names the stores create: the quoting of
// CREATE DATABASE and USE relies on it.
func checkIdent(name string, emptyOK bool) error {
	if name == "" {
		if emptyOK {
			return nil
		}
		return errors.New("mysql: empty database name")
	}
	if len(name) > 64 {
		return fmt.Errorf("mysql: database name %q is longer than 64 bytes", name)
	}
	for _, r := range name {
		if !(r == '_' || r == '$' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("mysql: database name %q: only letters, digits, _ and $ are allowed", name)
		}
	}
	return nil
}

// OpenDB opens a pool on cfg's server with database as the default schema
// ("" = none) and checks it answers within ctx. Pool sizes come from cfg,
// the dial timeout from cfg.DialTimeout and the per-read/write I/O timeout
// from cfg.QueryTimeout; every session runs at READ COMMITTED with a strict
// sql_mode. The wallet and notice stores open their pools here too.
// Errors name the DSN with its password redacted and wrap
// persistence.ErrUnavailable when the server cannot be reached.
func OpenDB(ctx context.Context, cfg configs.MySQLConfig, database string) (*sql.DB, error) {
	cfg = withDefaults(cfg)
	return openDB(ctx, cfg, database, cfg.QueryTimeout, slog.Default())
}

// openDB is OpenDB with the I/O timeout and the logger chosen by the
// caller (the stores of this package share it; keep the signature).
func openDB(ctx context.Context, cfg configs.MySQLConfig, database string, ioTimeout time.Duration, log *slog.Logger) (*sql.DB, error) {
	return openDBInit(ctx, cfg, database, ioTimeout, log, sessionInit)
}

// openDBInit is openDB with the session statements chosen by the caller
// (the room store adds its lock and idle-transaction limits).
func openDBInit(ctx context.Context, cfg configs.MySQLConfig, database string, ioTimeout time.Duration, log *slog.Logger, init []string) (*sql.DB, error) {
	db, redacted, err := newPool(cfg, database, ioTimeout, log, init)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout+cfg.QueryTimeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, wrapErr(fmt.Sprintf("open %s", redacted), cfg.DSN, err)
	}
	return db, nil
}

// newPool builds the pool of openDBInit without dialling: database/sql
// connects on first use.
func newPool(cfg configs.MySQLConfig, database string, ioTimeout time.Duration, log *slog.Logger, init []string) (*sql.DB, string, error) {
	dc, redacted, err := driverConfig(cfg.DSN, database, cfg.DialTimeout, ioTimeout)
	if err != nil {
		return nil, "", err
	}
	dc.Logger = driverLogger{log}
	if cfg.TLS.Enabled {
		// Set on the driver config, not registered by name: no process-wide
		// registry, and it wins over any tls= in the DSN. No plaintext
		// fallback: a server without TLS is refused.
		if dc.TLS, err = cfg.TLS.Load(); err != nil {
			return nil, "", fmt.Errorf("mysql.tls: %w", err)
		}
		dc.AllowFallbackToPlaintext = false
	}
	conn, err := driverMySQL.NewConnector(dc)
	if err != nil {
		return nil, "", fmt.Errorf("mysql: open %s: %s", redacted, scrub(err.Error(), cfg.DSN))
	}
	db := sql.OpenDB(initConnector{Connector: conn, init: init})
	db.SetMaxOpenConns(cfg.MaxOpenConns)
	db.SetMaxIdleConns(min(cfg.MaxIdleConns, cfg.MaxOpenConns))
	db.SetConnMaxLifetime(cfg.ConnMaxLifetime)
	return db, redacted, nil
}

// initConnector runs the session settings on every new connection, before
// database/sql hands it to anyone.
type initConnector struct {
	driver.Connector
	init []string
}

func (c initConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		_ = conn.Close()
		return nil, errors.New("mysql: driver connection cannot execute statements")
	}
	for _, q := range c.init {
		if _, err := ex.ExecContext(ctx, q, nil); err != nil {
			_ = conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// driverLogger sends the driver's own complaints (a dead idle connection,
// a bad packet) to slog instead of stderr. The driver never prints the DSN.
type driverLogger struct{ log *slog.Logger }

func (l driverLogger) Print(v ...any) {
	l.log.Warn("mysql driver", "component", "persistence/mysql", "msg", strings.TrimSpace(fmt.Sprint(v...)))
}

// MySQL server error numbers the stores branch on.
const (
	erDupEntry          = 1062
	erBadNull           = 1048 // the epoch fence's refusal, see fence.go
	erLockWaitTimeout   = 1205
	erLockDeadlock      = 1213
	erConCount          = 1040
	erServerShutdown    = 1053
	erQueryInterrupted  = 1317
	erConnectionKilled  = 1927 // MariaDB
	erQueryTimeout      = 3024 // MySQL max_execution_time
	erStatementTimeout  = 1969 // MariaDB max_statement_time
	erAccessDenied      = 1045
	erTooManyUserConns  = 1203
	erReadOnly          = 1290 // --read-only: a failover in progress
	erOptionPreventsRun = 1836 // super_read_only on a replica
	erNetPacketTooLarge = 1153 // a statement over max_allowed_packet; the server closes the connection
)

// errDBClosed is database/sql's "sql: database is closed", which it does
// not export. It is taken once from a pool closed on purpose, so a closed
// pool is recognised by identity (errors.Is) rather than by its text.
var errDBClosed = func() error {
	db := sql.OpenDB(closedConnector{})
	_ = db.Close()
	return db.PingContext(context.Background())
}()

// closedConnector is the pool of errDBClosed; the pool is closed before it
// would ever connect.
type closedConnector struct{}

func (closedConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("mysql: closedConnector never connects")
}
func (closedConnector) Driver() driver.Driver { return nil }

// classify maps a driver error to a persistence class, or returns nil when
// the error has no class (a bug: bad SQL, a missing table, bad data).
func classify(err error) error {
	var me *driverMySQL.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erDupEntry:
			return persistence.ErrConflict
		case erLockWaitTimeout, erLockDeadlock, erConCount, erServerShutdown, erQueryInterrupted,
			erConnectionKilled, erQueryTimeout, erStatementTimeout, erAccessDenied, erTooManyUserConns,
			erReadOnly, erOptionPreventsRun:
			return persistence.ErrUnavailable
		}
		return nil
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, driverMySQL.ErrInvalidConn),
		errors.Is(err, sql.ErrConnDone), errors.Is(err, errDBClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne):
		return persistence.ErrUnavailable
	}
	return nil
}

// wrapErr puts err in its class, prefixes what was being done, and makes
// sure no part of the DSN's password survives in the message.
func wrapErr(op, dsn string, err error) error {
	if err == nil {
		return nil
	}
	msg := scrub(err.Error(), dsn)
	if class := classify(err); class != nil {
		return &storeError{msg: "mysql: " + op + ": " + msg, class: class, cause: err}
	}
	return &storeError{msg: "mysql: " + op + ": " + msg, cause: err}
}

// storeError carries its class and its cause for errors.Is (ErrConflict,
// context.Canceled, ...) while its message is the scrubbed one.
type storeError struct {
	msg   string
	class error
	cause error
}

func (e *storeError) Error() string { return e.msg }

func (e *storeError) Unwrap() []error {
	if e.class == nil {
		return []error{e.cause}
	}
	return []error{e.class, e.cause}
}

func isDeadlock(err error) bool {
	var me *driverMySQL.MySQLError
	return errors.As(err, &me) && (me.Number == erLockDeadlock || me.Number == erLockWaitTimeout)
}

// isTxDeadlock: InnoDB rolled the whole transaction back to break a
// deadlock (unlike a lock wait timeout, which ends only the statement).
func isTxDeadlock(err error) bool {
	var me *driverMySQL.MySQLError
	return errors.As(err, &me) && me.Number == erLockDeadlock
}

// isLockWait: a statement waited innodb_lock_wait_timeout for a row lock
// and was rolled back (the statement only, not the transaction).
func isLockWait(err error) bool {
	var me *driverMySQL.MySQLError
	return errors.As(err, &me) && me.Number == erLockWaitTimeout
}

// isPacketTooBig: the server refused a statement bigger than its
// max_allowed_packet, and closed the connection it came on.
func isPacketTooBig(err error) bool {
	var me *driverMySQL.MySQLError
	return errors.As(err, &me) && me.Number == erNetPacketTooLarge
}

// isServerError reports whether the server rejected one statement with the
// connection and the transaction still usable (a duplicate key, data too
// long): the group committer then isolates the append that caused it.
func isServerError(err error) bool {
	var me *driverMySQL.MySQLError
	return errors.As(err, &me) && classify(err) != persistence.ErrUnavailable
}

// Unreachable reports whether err from Open, OpenDB or Attach means the
// server could not be reached (refused, reset, timed out), as opposed to
// one that answered with a refusal (wrong password, unknown database, a
// failed migration).
func Unreachable(err error) bool {
	var ne net.Error
	var me *driverMySQL.MySQLError
	if errors.As(err, &me) {
		return me.Number == erServerShutdown || me.Number == erConCount
	}
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, driverMySQL.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
