package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	driverMySQL "github.com/go-sql-driver/mysql"

	"github.com/hyapp/roomcell/configs"
)

// EnvDSN overrides the server: a go-sql-driver DSN without a database name.
const EnvDSN = "ROOMCELL_TEST_MYSQL_DSN"

// DefaultDSN is the server of the development machine and of CI.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/"

// DSN is the server DSN tests use.
func DSN() string {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// NewDatabase creates roomcell_test_<random> and returns a config whose
// room, wallet and notice databases all name it, with AutoMigrate on and
// group commit at its defaults. The database is dropped in t.Cleanup. A
// server that cannot be reached fails the test: these tests always run.
func NewDatabase(t testing.TB) (cfg configs.MySQLConfig, database string) {
	t.Helper()
	return NewDatabaseOn(t, DSN())
}

// NewDatabaseOn is NewDatabase on the server of dsn (a Server of this
// package, for tests that pause or kill it).
func NewDatabaseOn(t testing.TB, dsn string) (cfg configs.MySQLConfig, database string) {
	t.Helper()
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	database = "roomcell_test_" + hex.EncodeToString(suffix[:])

	dc, err := driverMySQL.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("mysqltest: $%s does not parse", EnvDSN) // the DSN may hold a password
	}
	dc.DBName = ""
	dc.Timeout = 5 * time.Second
	conn, err := driverMySQL.NewConnector(dc)
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+database+"` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("mysqltest: create database %s on %s: %v", database, dc.Addr, err)
	}
	t.Cleanup(func() {
		db := sql.OpenDB(conn)
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+database+"`"); err != nil {
			t.Errorf("mysqltest: drop database %s: %v", database, err)
		}
	})
	return configs.MySQLConfig{
		DSN:             dsn,
		RoomDatabase:    database,
		WalletDatabase:  database,
		NoticeDatabase:  database,
		MaxOpenConns:    32,
		MaxIdleConns:    16,
		ConnMaxLifetime: 30 * time.Minute,
		DialTimeout:     2 * time.Second,
		QueryTimeout:    10 * time.Second,
		AutoMigrate:     true,
		GroupCommit:     configs.GroupCommit{MaxBatch: 128, Linger: 2 * time.Millisecond},
	}, database
}
