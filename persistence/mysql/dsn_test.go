package mysql

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	driverMySQL "github.com/go-sql-driver/mysql"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

const secret = "S3cr3t-Pw_93Xq"

// closedAddr is a 127.0.0.1 port nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// No error and no log line of the store carries the DSN's password:
// not when the server is unreachable, not when it refuses the password,
// not when the DSN does not even parse.
func TestPasswordNeverInErrorsOrLogs(t *testing.T) {
	server, err := driverMySQL.ParseDSN(mysqltest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cases := map[string]string{
		"unreachable":    "root:" + secret + "@tcp(" + closedAddr(t) + ")/",
		"wrong password": server.User + ":" + secret + "@tcp(" + server.Addr + ")/",
		"unparsable":     "root:" + secret + "@tcp(127.0.0.1:3306",
		"bad param":      "root:" + secret + "@tcp(127.0.0.1:3306)/?parseTime=maybe",
	}
	for name, dsn := range cases {
		for _, autoMigrate := range []bool{false, true} {
			cfg := configs.MySQLConfig{DSN: dsn, DialTimeout: time.Second, QueryTimeout: time.Second, AutoMigrate: autoMigrate}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			_, err := Open(ctx, cfg, WithLogger(log))
			cancel()
			if err == nil {
				t.Fatalf("%s: Open succeeded", name)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error shows the password: %v", name, err)
			}
			t.Logf("%s: %v", name, err)
		}
		if _, err := OpenDB(t.Context(), configs.MySQLConfig{DSN: dsn, DialTimeout: time.Second}, ""); err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: OpenDB: %v", name, err)
		}
	}
	if name := "unreachable"; true {
		_, err := Open(t.Context(), configs.MySQLConfig{DSN: cases[name], DialTimeout: time.Second}, WithLogger(log))
		if !errors.Is(err, persistence.ErrUnavailable) {
			t.Errorf("Open of an unreachable server: got %v, want ErrUnavailable", err)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the logs show the password:\n%s", logs.String())
	}
}

// The store's own log line names the server, with the password masked.
func TestOpenLogsRedactedDSN(t *testing.T) {
	cfg, _ := mysqltest.NewDatabase(t)
	p := startProxy(t, cfg.DSN)
	// The proxy does not care about the password, but the server does: give
	// the DSN a password only for the redaction check below.
	withPw, _ := driverMySQL.ParseDSN(p.dsn())
	withPw.Passwd = secret
	if got := redactedDSN(withPw.FormatDSN(), "hyapp_room"); strings.Contains(got, secret) || !strings.Contains(got, "xxxxx") || !strings.Contains(got, "/hyapp_room") {
		t.Fatalf("redactedDSN = %q", got)
	}
	var logs bytes.Buffer
	cfg.DSN = p.dsn()
	s, err := Open(t.Context(), cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.Contains(logs.String(), "room store open") || !strings.Contains(logs.String(), p.addr) {
		t.Fatalf("open log line missing or without the server address:\n%s", logs.String())
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{&driverMySQL.MySQLError{Number: 1062, Message: "Duplicate entry"}, persistence.ErrConflict},
		{&driverMySQL.MySQLError{Number: 1213}, persistence.ErrUnavailable},
		{&driverMySQL.MySQLError{Number: 1205}, persistence.ErrUnavailable},
		{&driverMySQL.MySQLError{Number: 1146, Message: "Table doesn't exist"}, nil},
		{driverMySQL.ErrInvalidConn, persistence.ErrUnavailable},
		{context.DeadlineExceeded, persistence.ErrUnavailable},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, persistence.ErrUnavailable},
		{closedPoolErr(t), persistence.ErrUnavailable},
		// Only the pool's own error is a closed pool, not its text.
		{errors.New("sql: database is closed"), nil},
		{errors.New("something else"), nil},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
		wrapped := wrapErr("op", "", tc.err)
		if !errors.Is(wrapped, tc.err) || (tc.want != nil && !errors.Is(wrapped, tc.want)) {
			t.Errorf("wrapErr(%v) = %v: lost its cause or class", tc.err, wrapped)
		}
	}
}

// closedPoolErr is what database/sql answers on a pool that was closed:
// a real pool of this driver, not the one errDBClosed was taken from.
func closedPoolErr(t *testing.T) error {
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/")
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err = db.QueryContext(t.Context(), "SELECT 1")
	if err == nil {
		t.Fatal("a query on a closed pool succeeded")
	}
	return err
}
