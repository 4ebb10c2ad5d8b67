package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// rawDB is a pool on the test server without a default database.
func rawDB(t testing.TB) *sql.DB {
	t.Helper()
	cfg, _ := mysqltest.NewDatabase(t)
	db, err := OpenDB(t.Context(), cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// dropLater drops a database Migrate created outside mysqltest.
func dropLater(t testing.TB, db *sql.DB, database string) {
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+database+"`"); err != nil {
			t.Errorf("drop %s: %v", database, err)
		}
	})
}

func tableNames(t testing.TB, db *sql.DB, database string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name", database)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func TestMigrateCreatesDatabaseAndIsIdempotent(t *testing.T) {
	_, base := mysqltest.NewDatabase(t)
	db := rawDB(t)
	database := base + "_m" // does not exist yet
	dropLater(t, db, database)
	for run := range 2 {
		if err := Migrate(t.Context(), db, RoomSchema, database); err != nil {
			t.Fatalf("Migrate run %d: %v", run, err)
		}
	}
	want := []string{"room_command_log", "room_fences", "room_gift_outcomes", "room_outbox", "room_outbox_leases", "room_outbox_mq", "room_snapshots", "schema_migrations"}
	if got := tableNames(t, db, database); !slices.Equal(got, want) {
		t.Fatalf("tables: got %v, want %v", got, want)
	}
	ms, _ := Migrations(RoomSchema)
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM `"+database+"`.schema_migrations WHERE schema_name = 'room'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) {
		t.Fatalf("schema_migrations has %d room rows, want %d", n, len(ms))
	}
}

// Processes starting together all succeed and each file is applied once.
func TestMigrateConcurrentProcesses(t *testing.T) {
	cfg, database := mysqltest.NewDatabase(t)
	const procs = 4
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := range procs {
		wg.Go(func() { errs[i] = MigrateConfig(t.Context(), cfg, RoomSchema, database) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	db := rawDB(t)
	var n, distinct int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*), COUNT(DISTINCT version) FROM `"+database+"`.schema_migrations").Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	ms, _ := Migrations(RoomSchema)
	if n != len(ms) || distinct != len(ms) {
		t.Fatalf("schema_migrations: %d rows, %d versions; want %d each", n, distinct, len(ms))
	}
}

func TestMigrateRefusesEditedMigration(t *testing.T) {
	cfg, database := mysqltest.NewDatabase(t)
	if err := MigrateConfig(t.Context(), cfg, RoomSchema, database); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t)
	if _, err := db.ExecContext(t.Context(), "UPDATE `"+database+"`.schema_migrations SET checksum = REPEAT('0', 64) WHERE version = 1"); err != nil {
		t.Fatal(err)
	}
	err := MigrateConfig(t.Context(), cfg, RoomSchema, database)
	if err == nil || !strings.Contains(err.Error(), "changed after it was applied") {
		t.Fatalf("Migrate after an applied file changed: got %v, want a refusal", err)
	}
}

func TestMigrateRejectsBadInput(t *testing.T) {
	db := rawDB(t)
	for _, tc := range []struct{ schema, database string }{
		{"nope", "roomcell_x"},
		{"../room", "roomcell_x"},
		{RoomSchema, "bad`name"},
		{RoomSchema, ""},
	} {
		if err := Migrate(t.Context(), db, tc.schema, tc.database); err == nil {
			t.Errorf("Migrate(%q, %q) succeeded", tc.schema, tc.database)
		}
	}
}

// A database built by the initdb script and one built by Migrate are the
// same, and Migrate after the script applies nothing.
func TestInitDBScriptBuildsWhatMigrateBuilds(t *testing.T) {
	_, base := mysqltest.NewDatabase(t)
	db := rawDB(t)
	fromScript, fromMigrate := base+"_s", base+"_m"
	dropLater(t, db, fromScript)
	dropLater(t, db, fromMigrate)

	script, err := InitDBScript(RoomSchema, fromScript)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range SplitStatements(script) {
		if _, err := conn.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("initdb statement failed: %v\n%s", err, q)
		}
	}
	_ = conn.Close()
	if err := Migrate(t.Context(), db, RoomSchema, fromScript); err != nil {
		t.Fatalf("Migrate after the initdb script: %v", err)
	}
	if err := Migrate(t.Context(), db, RoomSchema, fromMigrate); err != nil {
		t.Fatal(err)
	}
	tables := tableNames(t, db, fromMigrate)
	if got := tableNames(t, db, fromScript); !slices.Equal(got, tables) {
		t.Fatalf("tables from the script %v, from Migrate %v", got, tables)
	}
	for _, table := range tables {
		a, b := showCreate(t, db, fromScript, table), showCreate(t, db, fromMigrate, table)
		if a != b {
			t.Errorf("%s differs:\nscript:  %s\nmigrate: %s", table, a, b)
		}
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM `"+fromScript+"`.schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if ms, _ := Migrations(RoomSchema); n != len(ms) {
		t.Fatalf("after script and Migrate: %d schema_migrations rows, want %d", n, len(ms))
	}
}

func showCreate(t testing.TB, db *sql.DB, database, table string) string {
	t.Helper()
	var name, ddl string
	if err := db.QueryRowContext(t.Context(), fmt.Sprintf("SHOW CREATE TABLE `%s`.`%s`", database, table)).Scan(&name, &ddl); err != nil {
		t.Fatal(err)
	}
	return ddl
}

func TestSplitStatements(t *testing.T) {
	script := "-- a comment; with a semicolon\n" +
		"CREATE TABLE t (a VARCHAR(3) DEFAULT ';', b INT COMMENT 'it''s; fine'); # trailing; comment\n" +
		"/* block; comment */ INSERT INTO t VALUES (\"x;\\\"y\", 1);\n" +
		"SELECT `we;ird`;\n" +
		"-- only a comment at the end;\n"
	got := SplitStatements(script)
	want := []string{
		"-- a comment; with a semicolon\nCREATE TABLE t (a VARCHAR(3) DEFAULT ';', b INT COMMENT 'it''s; fine')",
		"# trailing; comment\n/* block; comment */ INSERT INTO t VALUES (\"x;\\\"y\", 1)",
		"SELECT `we;ird`",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("SplitStatements:\n got %q\nwant %q", got, want)
	}
	if n := len(SplitStatements(mustMigration(t).SQL)); n != 3 {
		t.Fatalf("schema/room/001 splits into %d statements, want 3 tables", n)
	}
}

func mustMigration(t testing.TB) Migration {
	ms, err := Migrations(RoomSchema)
	if err != nil || len(ms) == 0 {
		t.Fatalf("Migrations(room): %v", err)
	}
	return ms[0]
}

func TestDatabaseForAndSchemas(t *testing.T) {
	if !slices.Contains(Schemas(), RoomSchema) {
		t.Fatalf("Schemas() = %v, want it to list room", Schemas())
	}
	db, err := DatabaseFor(configs.MySQLConfig{}, RoomSchema)
	if err != nil || db != "hyapp_room" {
		t.Fatalf("DatabaseFor(room) = %q, %v", db, err)
	}
	if _, err := DatabaseFor(configs.MySQLConfig{}, "nope"); err == nil {
		t.Fatal("DatabaseFor of an unknown schema succeeded")
	}
}

// Every deploy/mysql/initdb file is what InitDBScript renders from its
// embedded schema, so a container initialised from it and `roomcell
// migrate` build the same tables. ROOMCELL_UPDATE_INITDB=1 rewrites them.
func TestInitDBScriptsInSync(t *testing.T) {
	for _, c := range []struct{ schema, database, file string }{
		{RoomSchema, "hyapp_room", "01_hyapp_room.sql"},
		{WalletSchema, "hyapp_wallet", "02_hyapp_wallet.sql"},
		{NoticeSchema, "hyapp_notice", "03_hyapp_notice.sql"},
	} {
		file := "../../deploy/mysql/initdb/" + c.file
		want, err := InitDBScript(c.schema, c.database)
		if err != nil {
			t.Fatal(err)
		}
		if os.Getenv("ROOMCELL_UPDATE_INITDB") == "1" {
			if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s drifted from schema/%s: run ROOMCELL_UPDATE_INITDB=1 go test ./persistence/mysql -run InitDBScriptsInSync", file, c.schema)
		}
	}
	if len(Schemas()) != 3 {
		t.Errorf("schemas %v: a new one needs its initdb file listed here", Schemas())
	}
	if ms, _ := Migrations(NoticeSchema); !slices.ContainsFunc(ms, func(m Migration) bool { return strings.Contains(m.SQL, "notice_source_cursors") }) {
		t.Error("notice schema lacks the cursor table")
	}
}

// A database on which a newer binary recorded a migration this one does
// not have is refused, by the start (with or without auto_migrate) and by
// Migrate, with an error naming the database and the migration; the
// check (roomcell migrate --check) tells ahead, behind and up to date
// apart, changing nothing.
func TestSchemaAheadOfTheBinaryIsRefused(t *testing.T) {
	cfg, database := mysqltest.NewDatabase(t)
	for _, schema := range []string{RoomSchema, WalletSchema, NoticeSchema} {
		if err := MigrateConfig(t.Context(), cfg, schema, database); err != nil {
			t.Fatal(err)
		}
	}
	db := rawDB(t)
	open := map[string]func(configs.MySQLConfig) error{
		RoomSchema: func(c configs.MySQLConfig) error {
			s, err := Open(t.Context(), c)
			if err == nil {
				_ = s.Close()
			}
			return err
		},
		WalletSchema: func(c configs.MySQLConfig) error {
			s, err := OpenWalletStore(t.Context(), c)
			if err == nil {
				_ = s.Close()
			}
			return err
		},
		NoticeSchema: func(c configs.MySQLConfig) error {
			s, err := OpenNoticeStore(t.Context(), c)
			if err == nil {
				_ = s.Close()
			}
			return err
		},
	}
	for schema, openStore := range open {
		ms, _ := Migrations(schema)
		future := ms[len(ms)-1].Version + 1
		name := fmt.Sprintf("%03d_from_a_newer_binary", future)
		if st, err := CheckConfig(t.Context(), cfg, schema, database); err != nil || !st.UpToDate() {
			t.Fatalf("%s before: %v %v", schema, st, err)
		}
		if _, err := db.ExecContext(t.Context(), "INSERT INTO `"+database+"`.schema_migrations (schema_name, version, name, checksum, applied_at_ms) VALUES (?, ?, ?, REPEAT('a', 64), 0)",
			schema, future, name); err != nil {
			t.Fatal(err)
		}
		ahead := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, ErrSchemaAhead) || !strings.Contains(err.Error(), database) || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s %s with migration %s recorded: %v, want ErrSchemaAhead naming %s and the migration", schema, what, name, err, database)
			}
		}
		manual := cfg
		manual.AutoMigrate = false
		ahead("start without auto_migrate", openStore(manual))
		ahead("start with auto_migrate", openStore(cfg))
		ahead("migrate", MigrateConfig(t.Context(), cfg, schema, database))
		st, err := CheckConfig(t.Context(), cfg, schema, database)
		if err != nil || st.UpToDate() || len(st.Unknown) != 1 || st.Unknown[0].Name != name || !strings.Contains(st.String(), name) {
			t.Fatalf("%s check when ahead: %+v %v", schema, st, err)
		}
		// Behind: the binary's newest migration not recorded.
		if _, err := db.ExecContext(t.Context(), "DELETE FROM `"+database+"`.schema_migrations WHERE schema_name = ? AND version >= ?", schema, future-1); err != nil {
			t.Fatal(err)
		}
		st, err = CheckConfig(t.Context(), cfg, schema, database)
		if err != nil || st.UpToDate() || len(st.Pending) != 1 || st.Pending[0].Version != future-1 || !strings.Contains(st.String(), "behind") {
			t.Fatalf("%s check when behind: %+v %v", schema, st, err)
		}
		if err := openStore(manual); err != nil {
			t.Fatalf("%s start without auto_migrate, behind: %v (a warning, not an error)", schema, err)
		}
		// Its tables are in fact there: record it again as Migrate did.
		last := ms[len(ms)-1]
		if _, err := db.ExecContext(t.Context(), "INSERT INTO `"+database+"`.schema_migrations (schema_name, version, name, checksum, applied_at_ms) VALUES (?, ?, ?, ?, 0)",
			schema, last.Version, last.Name, last.Checksum); err != nil {
			t.Fatal(err)
		}
		if err := openStore(cfg); err != nil {
			t.Fatalf("%s start with auto_migrate, up to date again: %v", schema, err)
		}
		if st, err := CheckConfig(t.Context(), cfg, schema, database); err != nil || !st.UpToDate() {
			t.Fatalf("%s after migrating: %v %v", schema, st, err)
		}
	}
	if st, err := CheckConfig(t.Context(), cfg, RoomSchema, database+"_none"); err != nil || len(st.Pending) == 0 {
		t.Fatalf("a database that does not exist: %+v %v, want every migration pending", st, err)
	}
}

// Rows written before event_index existed and still to be sent get their
// index from their id, so a command's 11th event still goes after its
// 2nd after the upgrade.
func TestEventIndexBackfilledFromTheEventID(t *testing.T) {
	db, database, exec := roomSchemaBefore(t, "_ei", func(m Migration) bool { return strings.Contains(m.SQL, "event_index") })
	rows := map[string]struct {
		status string
		want   int
	}{
		"app:room:7:12": {"pending", 12}, "app:room:7:3": {"parked", 3}, "app:ro:om:7:11": {"pending", 11},
		"app:room:6:9": {"published", 0}, "legacy-id": {"pending", 0},
	}
	for id, r := range rows {
		exec("INSERT INTO room_outbox (event_id, app_code, room_id, room_seq, event_type, envelope, status, created_at_ms, updated_at_ms)"+
			" VALUES (?, 'app', 'room', 7, 'RoomUserJoined', '{}', ?, 1, 1)", id, r.status)
	}
	if err := Migrate(t.Context(), db, RoomSchema, database); err != nil {
		t.Fatal(err)
	}
	for id, r := range rows {
		var got int
		if err := db.QueryRowContext(t.Context(), "SELECT event_index FROM `"+database+"`.room_outbox WHERE event_id = ?", id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != r.want {
			t.Errorf("%s (%s): event_index %d, want %d", id, r.status, got, r.want)
		}
	}
}

// Rows written before the marks were made in-place keep what they said:
// a row never published reads published_at_ms 0 (it was NULL), a published
// one keeps its time, every status reads back as it was written (CHAR(9)
// pads it in storage, not in reads), and the status filters still find
// each row.
func TestOutboxMarksInPlaceUpgradeKeepsRows(t *testing.T) {
	db, database, exec := roomSchemaBefore(t, "_ip", func(m Migration) bool { return strings.Contains(m.Name, "marks_in_place") })
	type row struct {
		status, mq string
		pub, mqPub sql.NullInt64
		wantPub    int64
		wantMQPub  int64
	}
	rows := map[string]row{
		"app:room:1:0": {status: "pending", mq: "pending"},
		"app:room:2:0": {status: "published", mq: "published", pub: sql.NullInt64{Int64: 77, Valid: true}, mqPub: sql.NullInt64{Int64: 78, Valid: true}, wantPub: 77, wantMQPub: 78},
		"app:room:3:0": {status: "parked", mq: "parked"},
		"app:room:4:0": {status: "skipped", mq: "none"},
	}
	for id, r := range rows {
		exec("INSERT INTO room_outbox (event_id, app_code, room_id, room_seq, event_type, envelope, status, mq_status, published_at_ms, mq_published_at_ms, created_at_ms, updated_at_ms)"+
			" VALUES (?, 'app', 'room', 1, 'RoomUserJoined', '{}', ?, ?, ?, ?, 1, 1)", id, r.status, r.mq, r.pub, r.mqPub)
	}
	if err := Migrate(t.Context(), db, RoomSchema, database); err != nil {
		t.Fatal(err)
	}
	for id, r := range rows {
		var (
			status, mq string
			pub, mqPub int64
			byStatus   int
		)
		// The MQ columns moved to room_outbox_mq (a row without one there
		// is MQ status none).
		if err := db.QueryRowContext(t.Context(), "SELECT o.status, COALESCE(m.mq_status, 'none'), o.published_at_ms, COALESCE(m.mq_published_at_ms, 0)"+
			" FROM `"+database+"`.room_outbox o LEFT JOIN `"+database+"`.room_outbox_mq m ON m.event_id = o.event_id WHERE o.event_id = ?", id).
			Scan(&status, &mq, &pub, &mqPub); err != nil {
			t.Fatal(err)
		}
		if status != r.status || mq != r.mq || pub != r.wantPub || mqPub != r.wantMQPub {
			t.Errorf("%s after the upgrade: status %q mq %q published_at %d mq_published_at %d, want %q %q %d %d",
				id, status, mq, pub, mqPub, r.status, r.mq, r.wantPub, r.wantMQPub)
		}
		if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM `"+database+"`.room_outbox o LEFT JOIN `"+database+"`.room_outbox_mq m"+
			" ON m.event_id = o.event_id WHERE o.status = ? AND COALESCE(m.mq_status, 'none') = ?", r.status, r.mq).
			Scan(&byStatus); err != nil || byStatus != 1 {
			t.Errorf("%s: the status filter (%s, %s) finds %d rows, %v", id, r.status, r.mq, byStatus, err)
		}
	}
	// A status longer than the column is refused, not cut to fit.
	if _, err := db.ExecContext(t.Context(), "UPDATE `"+database+"`.room_outbox SET status = 'publishedX' WHERE event_id = 'app:room:1:0'"); err == nil {
		t.Error("a 10-character status was stored")
	}
}

// roomSchemaBefore makes a database of its own (the test's name plus
// suffix) with the room schema's migrations applied and recorded up to
// the first for which stop is true, and returns a statement runner on
// one connection that uses it.
// Rows written while the MQ columns were in room_outbox keep their MQ
// progress after they moved to room_outbox_mq: a row the fanout had
// (pending, published, parked) gets its row there with its status, time
// and lease, one it never had ('none') gets none, and the store reads
// each as before; the columns and their indexes are gone from room_outbox.
func TestOutboxMQTableUpgradeKeepsProgress(t *testing.T) {
	db, database, exec := roomSchemaBefore(t, "_mq", func(m Migration) bool { return strings.Contains(m.Name, "mq_table") })
	type row struct {
		status, mq    string
		mqPub, lockMs int64
		by            any
	}
	rows := map[string]row{
		"app:room:1:0": {status: "pending", mq: "pending", by: "mq-a", lockMs: 9000},
		"app:room:2:0": {status: "published", mq: "published", mqPub: 78},
		"app:room:3:0": {status: "pending", mq: "parked"},
		"app:room:4:0": {status: "published", mq: "none"},
	}
	for id, r := range rows {
		exec("INSERT INTO room_outbox (event_id, app_code, room_id, room_seq, event_index, event_type, envelope, status, mq_status, mq_published_at_ms, mq_locked_by, mq_lock_until_ms, created_at_ms, updated_at_ms)"+
			" VALUES (?, 'app', 'room', ?, 0, 'RoomUserJoined', ?, ?, ?, ?, ?, ?, 5, 5)", id, id[9:10], `{"event_id":"`+id+`"}`, r.status, r.mq, r.mqPub, r.by, r.lockMs)
	}
	if err := Migrate(t.Context(), db, RoomSchema, database); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = ? AND table_name = 'room_outbox' AND column_name LIKE 'mq\\_%'", database).
		Scan(&n); err != nil || n != 0 {
		t.Fatalf("room_outbox keeps %d mq_ columns (%v)", n, err)
	}
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = ? AND table_name = 'room_outbox' AND index_name LIKE '%mq%'", database).
		Scan(&n); err != nil || n != 0 {
		t.Fatalf("room_outbox keeps %d entries of MQ indexes (%v)", n, err)
	}
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM `"+database+"`.room_outbox_mq").Scan(&n); err != nil || n != 3 {
		t.Fatalf("room_outbox_mq has %d rows (%v), want 3: one per row the fanout had", n, err)
	}
	cfg, _ := mysqltest.NewDatabase(t) // the server's config; the store reads the upgraded database
	cfg.RoomDatabase, cfg.AutoMigrate = database, false
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, r := range rows {
		got, err := s.GetOutbox(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		wantBy, wantLock := "", int64(0)
		if r.mq == "pending" {
			wantBy, wantLock = r.by.(string), r.lockMs
		}
		if got.Status != r.status || got.MQStatus != r.mq || got.MQPublishedAtMs != r.mqPub || got.MQLockedBy != wantBy || got.MQLockUntilMs != wantLock {
			t.Errorf("%s after the upgrade: IM %q MQ %q mq_published_at %d lease %q/%d, want %q %q %d %q/%d",
				id, got.Status, got.MQStatus, got.MQPublishedAtMs, got.MQLockedBy, got.MQLockUntilMs, r.status, r.mq, r.mqPub, wantBy, wantLock)
		}
	}
	st, err := s.OutboxStats(t.Context())
	if err != nil || st.MQPending != 1 {
		t.Fatalf("OutboxStats after the upgrade: %+v %v, want MQPending 1", st, err)
	}
}

func roomSchemaBefore(t *testing.T, suffix string, stop func(Migration) bool) (*sql.DB, string, func(q string, args ...any)) {
	t.Helper()
	_, base := mysqltest.NewDatabase(t)
	db := rawDB(t)
	database := base + suffix
	dropLater(t, db, database)
	ms, err := Migrations(RoomSchema)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.ExecContext(t.Context(), q, args...); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	exec(createDatabaseSQL(database))
	exec("USE `" + database + "`")
	exec(migrationsTable)
	for _, m := range ms {
		if stop(m) {
			break
		}
		for _, q := range SplitStatements(m.SQL) {
			exec(q)
		}
		exec("INSERT INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms) VALUES (?, ?, ?, ?, 0)",
			RoomSchema, m.Version, m.Name, m.Checksum)
	}
	return db, database, exec
}
