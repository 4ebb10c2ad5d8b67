package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// roomcell migrate --check for deploy pipelines: exit 1 while a database
// is behind the binary, 0 once migrated, 1 again when a newer binary's
// migration is recorded (naming the database and the migration), and it
// changes nothing; migrate itself refuses the database ahead.
func TestMigrateCheckForDeployPipelines(t *testing.T) {
	mcfg, database := mysqltest.NewDatabase(t)
	f := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(f, []byte(fmt.Sprintf("mysql:\n  dsn: %q\n", mcfg.DSN)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := func(extra ...string) []string {
		return append([]string{"migrate", "--config", f, "--room-database", database, "--wallet-database", database, "--notice-database", database}, extra...)
	}
	code, out, errOut := runCell(args("--check")...)
	if code != 1 || !strings.Contains(out, "behind the binary") || !strings.Contains(errOut, "not at this binary's schema") {
		t.Fatalf("check of an empty database: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCell(args()...); code != 0 {
		t.Fatalf("migrate: exit %d\n%s", code, errOut)
	}
	code, out, errOut = runCell(args("--check")...)
	if code != 0 || strings.Count(out, "up to date") != len(mysql.Schemas()) {
		t.Fatalf("check after migrate: exit %d\n%s\n%s", code, out, errOut)
	}
	ms, _ := mysql.Migrations(mysql.RoomSchema)
	future := fmt.Sprintf("%03d_from_a_newer_binary", ms[len(ms)-1].Version+1)
	db, err := mysql.OpenDB(t.Context(), mcfg, database)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "INSERT INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms) VALUES ('room', ?, ?, REPEAT('a', 64), 0)",
		ms[len(ms)-1].Version+1, future); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCell(args("--check")...)
	if code != 1 || !strings.Contains(out, future) || !strings.Contains(out, database) || !strings.Contains(out, "ahead of the binary") {
		t.Fatalf("check with a newer binary's migration: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runCell(args()...)
	if code != 1 || !strings.Contains(errOut, future) {
		t.Fatalf("migrate with a newer binary's migration: exit %d\n%s", code, errOut)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM schema_migrations WHERE schema_name = 'room'").Scan(&n); err != nil || n != len(ms)+1 {
		t.Fatalf("the check or the refused migrate changed schema_migrations: %d rows (%v), want %d", n, err, len(ms)+1)
	}
}
