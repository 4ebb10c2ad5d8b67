package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hyapp/roomcell/configs"
)

// schemaFS holds every schema of the project, one folder each
// (schema/<name>/NNN_description.sql). A new folder is picked up by
// Schemas and MigrateAll without touching this file.
//
//go:embed schema
var schemaFS embed.FS

// Migration is one embedded schema file.
type Migration struct {
	Schema   string // folder name under schema/, e.g. "room"
	Version  int    // the NNN prefix
	Name     string // file name without .sql
	SQL      string
	Checksum string // sha256 of SQL, hex
}

// Schemas lists the embedded schema names, sorted.
func Schemas() []string {
	entries, _ := fs.ReadDir(schemaFS, "schema")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// Migrations returns the files of schema in version order.
func Migrations(schema string) ([]Migration, error) {
	dir := path.Join("schema", schema)
	entries, err := fs.ReadDir(schemaFS, dir)
	if err != nil || schema == "" || strings.ContainsAny(schema, "/.") {
		return nil, fmt.Errorf("mysql: unknown schema %q (have %v)", schema, Schemas())
	}
	var out []Migration
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sql")
		if e.IsDir() || !ok {
			continue
		}
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("mysql: schema %s: file %s does not start with a version (NNN_description.sql)", schema, e.Name())
		}
		b, err := fs.ReadFile(schemaFS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		out = append(out, Migration{Schema: schema, Version: v, Name: name, SQL: string(b), Checksum: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("mysql: schema %s: version %d used by %s and %s", schema, out[i].Version, out[i-1].Name, out[i].Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mysql: schema %s has no .sql files", schema)
	}
	return out, nil
}

// migrationsTable records what Migrate applied, per schema: two schemas
// may share a database (the tests put every store in one).
const migrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
  schema_name   VARCHAR(64)  NOT NULL,
  version       INT          NOT NULL,
  name          VARCHAR(255) NOT NULL,
  checksum      CHAR(64)     NOT NULL,
  applied_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (schema_name, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

func createDatabaseSQL(database string) string {
	return "CREATE DATABASE IF NOT EXISTS `" + database + "` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
}

// lockName is the GET_LOCK name that serialises migrations of one
// database across processes. MySQL caps lock names at 64 characters.
func lockName(database string) string {
	name := "roomcell_migrate." + database
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(database))
	return "roomcell_migrate." + hex.EncodeToString(sum[:20])
}

// Migrate creates database if it is missing and applies the files of
// schema that schema_migrations does not list yet, in version order,
// recording each one after its statements ran. It holds GET_LOCK for the
// database meanwhile, so two processes starting at once apply each file
// once; running it again is a no-op. An applied file whose checksum
// changed is an error: applied migrations are never edited, a change is a
// new file. db may have any default database; Migrate works on a
// connection of its own and discards it afterwards.
func Migrate(ctx context.Context, db *sql.DB, schema, database string) error {
	return migrate(ctx, db, schema, database, slog.Default())
}

func migrate(ctx context.Context, db *sql.DB, schema, database string, log *slog.Logger) (err error) {
	if err := checkIdent(database, false); err != nil {
		return err
	}
	ms, err := Migrations(schema)
	if err != nil {
		return err
	}
	fail := func(what string, err error) error {
		return wrapErr(fmt.Sprintf("migrate %s into %s: %s", schema, database, what), "", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fail("connect", err)
	}
	defer func() {
		// USE changed the session's default database: the connection must
		// not go back to a pool that expects another one. Discarding it
		// also releases the lock.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}()

	wait := 60 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lockName(database), max(1, int(math.Ceil(wait.Seconds())))).Scan(&got); err != nil {
		return fail("lock", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fail("lock", fmt.Errorf("another process held %s for %s", lockName(database), wait))
	}
	for _, q := range []string{createDatabaseSQL(database), "USE `" + database + "`", migrationsTable} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fail("prepare", err)
		}
	}
	recorded, err := readRecorded(ctx, conn, "schema_migrations", schema)
	if err != nil {
		return fail("read versions", err)
	}
	if st := compare(schema, database, ms, recorded); len(st.Unknown) > 0 {
		// Never migrate under a newer binary's schema: what it added may
		// be what this binary's statements would break.
		return st.aheadError()
	}
	applied := map[int]string{}
	for _, r := range recorded {
		applied[r.Version] = r.Checksum
	}
	for _, m := range ms {
		if sum, ok := applied[m.Version]; ok {
			if sum != m.Checksum {
				return fmt.Errorf("mysql: migrate %s into %s: %s was changed after it was applied (checksum %s, recorded %s); add a new file instead",
					schema, database, m.Name, m.Checksum[:12], sum[:min(12, len(sum))])
			}
			continue
		}
		start := time.Now()
		for _, q := range SplitStatements(m.SQL) {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return fail(m.Name, err)
			}
		}
		if _, err := conn.ExecContext(ctx,
			"INSERT INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms) VALUES (?, ?, ?, ?, ?)",
			schema, m.Version, m.Name, m.Checksum, time.Now().UnixMilli()); err != nil {
			return fail("record "+m.Name, err)
		}
		log.Info("schema migration applied", "component", "persistence/mysql", "schema", schema,
			"database", database, "migration", m.Name, "took", time.Since(start))
	}
	return nil
}

// ErrSchemaAhead: the database records a migration of the schema this
// binary does not have; a newer binary migrated it. Serving on it could
// write what the newer schema forbids, or miss what it requires.
var ErrSchemaAhead = errors.New("schema ahead of the binary")

// Recorded is a row of schema_migrations.
type Recorded struct {
	Version  int
	Name     string
	Checksum string
}

// SchemaStatus compares a database's recorded migrations of a schema with
// the binary's.
type SchemaStatus struct {
	Schema, Database string
	// Newest is the binary's newest migration of the schema.
	Newest string
	// Pending are the binary's migrations not recorded (the database is
	// behind); Unknown are recorded ones the binary does not have (ahead).
	Pending []Migration
	Unknown []Recorded
}

// UpToDate says whether the database is at the binary's schema.
func (s SchemaStatus) UpToDate() bool { return len(s.Pending) == 0 && len(s.Unknown) == 0 }

func (s SchemaStatus) aheadError() error {
	names := make([]string, len(s.Unknown))
	for i, r := range s.Unknown {
		names[i] = fmt.Sprintf("%s (version %d)", r.Name, r.Version)
	}
	return fmt.Errorf("mysql: database %s: %w: schema %s has migration %s recorded, unknown to this binary (its newest is %s); run the binary that applied it, or restore the database",
		s.Database, ErrSchemaAhead, s.Schema, strings.Join(names, ", "), s.Newest)
}

// String is one line for `roomcell migrate --check`.
func (s SchemaStatus) String() string {
	switch {
	case len(s.Unknown) > 0:
		return s.aheadError().Error()
	case len(s.Pending) > 0:
		names := make([]string, len(s.Pending))
		for i, m := range s.Pending {
			names[i] = m.Name
		}
		return fmt.Sprintf("database %s: schema %s is behind the binary: %s not applied", s.Database, s.Schema, strings.Join(names, ", "))
	}
	return fmt.Sprintf("database %s: schema %s up to date (%s)", s.Database, s.Schema, s.Newest)
}

func compare(schema, database string, ms []Migration, recorded []Recorded) SchemaStatus {
	st := SchemaStatus{Schema: schema, Database: database, Newest: ms[len(ms)-1].Name}
	known := map[int]bool{}
	for _, m := range ms {
		known[m.Version] = true
	}
	have := map[int]bool{}
	for _, r := range recorded {
		have[r.Version] = true
		if !known[r.Version] {
			st.Unknown = append(st.Unknown, r)
		}
	}
	for _, m := range ms {
		if !have[m.Version] {
			st.Pending = append(st.Pending, m)
		}
	}
	return st
}

// readRecorded reads schema's rows of table (schema_migrations, qualified
// or not), in version order.
func readRecorded(ctx context.Context, q querier, table, schema string) ([]Recorded, error) {
	rows, err := q.QueryContext(ctx, "SELECT version, name, checksum FROM "+table+" WHERE schema_name = ? ORDER BY version", schema)
	if err != nil {
		return nil, err
	}
	var out []Recorded
	for rows.Next() {
		var r Recorded
		if err := rows.Scan(&r.Version, &r.Name, &r.Checksum); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// CheckSchema compares database's migrations of schema with the binary's,
// on db (any default database), changing nothing. A database (or one
// without schema_migrations) that does not exist has every migration
// pending.
func CheckSchema(ctx context.Context, db *sql.DB, schema, database string) (SchemaStatus, error) {
	if err := checkIdent(database, false); err != nil {
		return SchemaStatus{}, err
	}
	ms, err := Migrations(schema)
	if err != nil {
		return SchemaStatus{}, err
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = 'schema_migrations'", database).Scan(&n); err != nil {
		return SchemaStatus{}, wrapErr("check schema of "+database, "", err)
	}
	var recorded []Recorded
	if n > 0 {
		if recorded, err = readRecorded(ctx, db, "`"+database+"`.schema_migrations", schema); err != nil {
			return SchemaStatus{}, wrapErr("check schema of "+database, "", err)
		}
	}
	return compare(schema, database, ms, recorded), nil
}

// refuseAhead is the start's check of a store opened without migrating:
// a schema ahead of the binary is an error, one behind a warning (the
// statements that need the missing migration will fail).
func refuseAhead(ctx context.Context, db *sql.DB, schema, database string, log *slog.Logger) error {
	st, err := CheckSchema(ctx, db, schema, database)
	if err != nil {
		return err
	}
	if len(st.Unknown) > 0 {
		return st.aheadError()
	}
	if len(st.Pending) > 0 {
		log.Warn("schema behind the binary: run roomcell migrate", "component", "persistence/mysql",
			"schema", schema, "database", database, "pending", st.Pending[0].Name, "pending_count", len(st.Pending))
	}
	return nil
}

// CheckConfig opens a short-lived pool on cfg's server and runs
// CheckSchema (`roomcell migrate --check`).
func CheckConfig(ctx context.Context, cfg configs.MySQLConfig, schema, database string) (SchemaStatus, error) {
	cfg = withDefaults(cfg)
	cfg.MaxOpenConns, cfg.MaxIdleConns = 2, 1
	db, err := openDB(ctx, cfg, "", cfg.QueryTimeout, slog.Default())
	if err != nil {
		return SchemaStatus{}, err
	}
	defer db.Close()
	st, err := CheckSchema(ctx, db, schema, database)
	if err != nil {
		return st, errors.New(scrub(err.Error(), cfg.DSN))
	}
	return st, nil
}

// MigrateConfig opens a short-lived pool on cfg's server and runs Migrate.
// The pool has no I/O timeout: a migration of a big table may run for
// long, and ctx bounds it.
func MigrateConfig(ctx context.Context, cfg configs.MySQLConfig, schema, database string) error {
	return migrateConfig(ctx, cfg, schema, database, slog.Default())
}

func migrateConfig(ctx context.Context, cfg configs.MySQLConfig, schema, database string, log *slog.Logger) error {
	cfg = withDefaults(cfg)
	cfg.MaxOpenConns, cfg.MaxIdleConns = 2, 1
	db, err := openDB(ctx, cfg, "", 0, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrate(ctx, db, schema, database, log); err != nil {
		// Belt and braces: the DSN never reaches Migrate's errors; one
		// without it keeps its identity (ErrSchemaAhead).
		if text := scrub(err.Error(), cfg.DSN); text != err.Error() {
			return errors.New(text)
		}
		return err
	}
	return nil
}

// DatabaseFor is the configured database of an embedded schema: room,
// wallet and notice map to mysql.room_database, wallet_database and
// notice_database.
func DatabaseFor(cfg configs.MySQLConfig, schema string) (string, error) {
	cfg = withDefaults(cfg)
	switch schema {
	case RoomSchema:
		return cfg.RoomDatabase, nil
	case "wallet":
		return cfg.WalletDatabase, nil
	case "notice":
		return cfg.NoticeDatabase, nil
	}
	return "", fmt.Errorf("mysql: no database configured for schema %q", schema)
}

// MigrateAll migrates every embedded schema into its configured database:
// what `roomcell migrate` runs.
func MigrateAll(ctx context.Context, cfg configs.MySQLConfig) error {
	for _, schema := range Schemas() {
		database, err := DatabaseFor(cfg, schema)
		if err != nil {
			return err
		}
		if err := MigrateConfig(ctx, cfg, schema, database); err != nil {
			return err
		}
	}
	return nil
}

// InitDBScript renders the deploy/mysql/initdb file of schema: the same
// statements Migrate runs, with CREATE DATABASE/USE and the
// schema_migrations rows, so a container initialised from it and a
// database built by Migrate end up the same (a test holds the two
// together).
func InitDBScript(schema, database string) (string, error) {
	if err := checkIdent(database, false); err != nil {
		return "", err
	}
	ms, err := Migrations(schema)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- Code generated from persistence/mysql/schema/%s by mysql.InitDBScript(%q, %q). DO NOT EDIT.\n", schema, schema, database)
	b.WriteString("-- Regenerate: ROOMCELL_UPDATE_INITDB=1 go test ./persistence/mysql -run InitDBScriptInSync\n")
	b.WriteString("-- The MySQL image runs this once on an empty data directory. `roomcell migrate`\n")
	b.WriteString("-- (or mysql.auto_migrate) applies the same files and finds them recorded in\n")
	b.WriteString("-- schema_migrations, so it only ever adds newer ones.\n\n")
	b.WriteString(createDatabaseSQL(database) + ";\n")
	b.WriteString("USE `" + database + "`;\n\n")
	b.WriteString(migrationsTable + ";\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "\n-- ---- schema/%s/%s.sql ----\n", schema, m.Name)
		b.WriteString(strings.TrimRight(m.SQL, "\n") + "\n")
		fmt.Fprintf(&b, "INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)\n"+
			"  VALUES ('%s', %d, '%s', '%s', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));\n", schema, m.Version, m.Name, m.Checksum)
	}
	return b.String(), nil
}

// SplitStatements cuts a SQL script at the semicolons that end statements,
// skipping those inside quotes, backticks and comments, and drops pieces
// that hold only comments and space.
func SplitStatements(script string) []string {
	var (
		out   []string
		start int
		real  bool // the current piece has something besides comments
	)
	emit := func(end int) {
		if real {
			out = append(out, strings.TrimSpace(script[start:end]))
		}
		start, real = end+1, false
	}
	for i := 0; i < len(script); i++ {
		c := script[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			real = true
			for i++; i < len(script) && script[i] != c; i++ {
				if script[i] == '\\' && c != '`' {
					i++
				}
			}
		case c == '#' || c == '-' && strings.HasPrefix(script[i:], "-- ") || strings.HasPrefix(script[i:], "--\n"):
			for i < len(script) && script[i] != '\n' {
				i++
			}
		case c == '/' && strings.HasPrefix(script[i:], "/*"):
			end := strings.Index(script[i+2:], "*/")
			if end < 0 {
				i = len(script)
			} else {
				i += end + 3
			}
		case c == ';':
			emit(i)
		case c != ' ' && c != '\t' && c != '\n' && c != '\r':
			real = true
		}
	}
	emit(len(script))
	return out
}
