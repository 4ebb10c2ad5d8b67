package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hyapp/roomcell/configs"
)

// EnvAddr overrides the shared server's address.
const EnvAddr = "ROOMCELL_TEST_REDIS_ADDR"

// Addr is the shared server tests use.
func Addr() string {
	if a := os.Getenv(EnvAddr); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

func randomPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "roomcell_test_" + hex.EncodeToString(b[:]) + ":"
}

// Config returns a Redis config on addr (the shared server when empty)
// with a fresh key prefix; every key under it is deleted in t.Cleanup. A
// server that cannot be reached fails the test: these tests always run.
func Config(t testing.TB, addr string) configs.RedisConfig {
	t.Helper()
	if addr == "" {
		addr = Addr()
	}
	cfg := configs.RedisConfig{Enabled: true, Addr: addr, KeyPrefix: randomPrefix(), Timeout: 2 * time.Second}
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("redistest: redis at %s: %v", addr, err)
	}
	t.Cleanup(func() {
		defer c.Close()
		if err := DeletePrefix(context.Background(), c, cfg.KeyPrefix); err != nil {
			t.Errorf("redistest: cleanup of %s: %v", cfg.KeyPrefix, err)
		}
	})
	return cfg
}

// DeletePrefix deletes every key under prefix. SCAN with MATCH is fine in
// a test; production code never walks the keyspace.
func DeletePrefix(ctx context.Context, c goredis.UniversalClient, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// CountPrefix counts the keys under prefix (tests check cleanup with it).
func CountPrefix(ctx context.Context, c goredis.UniversalClient, prefix string) (int, error) {
	var cursor uint64
	n := 0
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return 0, err
		}
		n += len(keys)
		if cursor = next; cursor == 0 {
			return n, nil
		}
	}
}

// Server is a private redis-server started by a test, without
// persistence: a restart comes back empty, like a failed-over cache.
type Server struct {
	Addr string
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

// StartServer starts redis-server on a free 127.0.0.1 port; it is killed
// in t.Cleanup.
func StartServer(t testing.TB) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	_ = lis.Close()
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), t: t, port: port, dir: t.TempDir()}
	s.Restart()
	t.Cleanup(s.Kill)
	return s
}

// Kill stops the server with SIGKILL and waits for it. Killing a stopped
// server is a no-op.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on the same port and waits until it
// answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("redistest: server is running")
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--protected-mode", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start redis-server: %v", err)
	}
	s.cmd = cmd
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.Kill()
			s.t.Fatalf("redistest: redis-server on %s did not answer: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// String names the server in test logs.
func (s *Server) String() string { return fmt.Sprintf("redis-server %s", s.Addr) }
