package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/certtest"
	"github.com/hyapp/roomcell/internal/logtest"
	"github.com/hyapp/roomcell/persistence/redis"
	"github.com/hyapp/roomcell/persistence/redis/redistest"
)

// The process refuses each dangerous configuration before it opens
// anything, naming the key; the same configuration on loopback starts.
func TestProcessRefusesDangerousConfigs(t *testing.T) {
	os.Unsetenv("RC_UNSET_CLIENT_TOKENS")
	os.Unsetenv("RC_UNSET_TLS_CERT")
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"unset token variable", "grpc:\n  addr: \"127.0.0.1:0\"\n  auth:\n    client_tokens: [\"${RC_UNSET_CLIENT_TOKENS}\"]\n",
			"grpc.auth.client_tokens[0]: environment variable RC_UNSET_CLIENT_TOKENS is not set"},
		{"unset cert variable", "grpc:\n  addr: \"127.0.0.1:0\"\n  tls:\n    cert_file: \"${RC_UNSET_TLS_CERT}\"\n    key_file: \"k\"\n",
			"grpc.tls.cert_file: environment variable RC_UNSET_TLS_CERT is not set"},
		{"empty token list on 0.0.0.0", "grpc:\n  addr: \"0.0.0.0:0\"\n  auth: {operator_tokens: [op]}\n  tls: {cert_file: c, key_file: k}\nhttp: {addr: \"127.0.0.1:0\"}\n",
			"grpc.auth.client_tokens: empty while the gRPC listener 0.0.0.0:0 reaches beyond loopback"},
		{"no TLS on 0.0.0.0", "grpc:\n  addr: \"0.0.0.0:0\"\n  auth: {client_tokens: [c], operator_tokens: [op]}\nhttp: {addr: \"127.0.0.1:0\"}\n",
			"grpc.tls.cert_file: empty while"},
		{"fake IM with MySQL", "grpc: {addr: \"127.0.0.1:0\"}\nhttp: {addr: \"127.0.0.1:0\"}\nstore: {kind: mysql}\nmysql: {dsn: \"root@tcp(127.0.0.1:1)/\"}\n",
			"tencent_im.enabled: false while store.kind is mysql"},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
		if err := os.WriteFile(f, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		var out logtest.Buffer
		done := make(chan int, 1)
		go func() { done <- run([]string{"--config", f}, &out, &out) }()
		select {
		case rc := <-done:
			if rc == 0 || !strings.Contains(out.String(), tc.want) {
				t.Errorf("%s: exit %d, output %q; want a failure saying %q", tc.name, rc, out.String(), tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the process started", tc.name)
		}
	}

	// Dev on loopback, no tokens, no TLS: starts.
	cfg, err := loadConfig(flags{dev: true, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	var out logtest.Buffer
	app, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(&out, nil)), true)
	if err != nil {
		t.Fatalf("dev on loopback: %v", err)
	}
	app.Shutdown()
	if strings.Contains(out.String(), "allow_insecure: the gRPC") {
		t.Fatalf("a loopback node warned about open doors: %s", out.String())
	}
}

// allow_insecure starts a wide-open node, which says so at WARN at start
// and again every period.
func TestAllowInsecureWarnsAtStartAndPeriodically(t *testing.T) {
	defer func(d time.Duration) { openDoorsWarnEvery = d }(openDoorsWarnEvery)
	openDoorsWarnEvery = 100 * time.Millisecond
	cfg, err := loadConfig(flags{dev: true, grpcAddr: "0.0.0.0:0", httpAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(&logtest.Buffer{}, nil)), true); err == nil {
		t.Fatal("started on 0.0.0.0 without tokens or TLS")
	}
	cfg.AllowInsecure = true
	var out logtest.Buffer
	app, err := Start(context.Background(), cfg, slog.New(slog.NewTextHandler(&out, nil)), true)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond)
	app.Shutdown()
	n := strings.Count(out.String(), "level=WARN msg=\"allow_insecure: the gRPC listener reaches beyond loopback")
	if n < 3 || !strings.Contains(out.String(), "unset=grpc.auth.client_tokens,grpc.auth.operator_tokens,grpc.tls.cert_file") {
		t.Fatalf("%d open-door warnings in %s; want one at start and one per period", n, out.String())
	}
	time.Sleep(250 * time.Millisecond)
	if m := strings.Count(out.String(), "allow_insecure: the gRPC"); m != n {
		t.Fatalf("warnings went on after shutdown: %d then %d", n, m)
	}
}

// Redis TLS against a plaintext Redis refuses to start, naming redis.tls,
// as the same MySQL mistake does; it no longer starts a node without its
// directory.
func TestRedisTLSMistakeRefusesStart(t *testing.T) {
	ca := certtest.NewCA(t, "redis-ca")
	cfg, err := loadConfig(flags{dev: true, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Redis.Enabled, cfg.Redis.Addr = true, redistest.Addr()
	cfg.Redis.TLS = configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile}
	app, err := Start(context.Background(), cfg, slog.New(slog.DiscardHandler), true)
	if err == nil {
		app.Shutdown()
		t.Fatal("started with TLS against a plaintext Redis")
	}
	if !strings.Contains(err.Error(), "redis.tls") || !errors.Is(err, redis.ErrTLSMistake) {
		t.Fatalf("error %v does not name redis.tls", err)
	}
}
