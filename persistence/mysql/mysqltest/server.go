package mysqltest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	driverMySQL "github.com/go-sql-driver/mysql"
)

// Server is a private mariadbd for fault tests: its own data directory
// and port, so a test may pause (SIGSTOP) or kill it without touching the
// shared server every other test uses.
type Server struct {
	DSN  string
	Addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// StartServer installs a fresh data directory under t.TempDir and starts
// mariadbd on a free loopback port, without grant tables (root, no
// password). It fails the test when mariadbd or mariadb-install-db is
// missing: a fault test that skipped would pass a guarantee nobody tested.
func StartServer(t testing.TB) *Server {
	t.Helper()
	// Not t.TempDir: its parent is private to this user, and mariadbd runs
	// as mysql when the tests run as root.
	dir, err := os.MkdirTemp("", "roomcell-mariadbd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	args := []string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}
	runAs := ""
	if os.Geteuid() == 0 {
		// mariadbd refuses to run as root.
		if _, err := user.Lookup("mysql"); err != nil {
			t.Fatalf("mysqltest: running as root needs a mysql user for mariadbd: %v", err)
		}
		runAs = "mysql"
		args = append(args, "--user=mysql")
	}
	if out, err := exec.Command("mariadb-install-db", args...).CombinedOutput(); err != nil {
		t.Fatalf("mysqltest: mariadb-install-db: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srvArgs := []string{"--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--skip-grant-tables", "--skip-name-resolve", "--innodb-buffer-pool-size=128M", "--innodb-log-file-size=64M",
		"--innodb-flush-log-at-trx-commit=2", "--max-connections=500", "--log-error=" + filepath.Join(dir, "error.log")}
	if runAs != "" {
		srvArgs = append(srvArgs, "--user="+runAs)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, done: make(chan struct{})}
	s.DSN = fmt.Sprintf("root@tcp(%s)/", s.Addr)
	s.cmd = exec.Command("/usr/sbin/mariadbd", srvArgs...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("mysqltest: start mariadbd: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	dc, _ := driverMySQL.ParseDSN(s.DSN)
	dc.Timeout = time.Second
	conn, _ := driverMySQL.NewConnector(dc)
	db := sql.OpenDB(conn)
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return s
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("mysqltest: mariadbd exited at start:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mysqltest: mariadbd on %s not up after 60 s: %v", s.Addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pause freezes the server (SIGSTOP): connections stay open and hang.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume undoes Pause.
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }
