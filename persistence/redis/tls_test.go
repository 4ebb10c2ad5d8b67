package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/certtest"
	"github.com/hyapp/roomcell/persistence/redis/redistest"
)

// tlsFront terminates TLS with cert/key and forwards to the test Redis,
// standing in for a TLS-enabled Redis or its TLS sidecar.
func tlsFront(t *testing.T, cert, key string) string {
	t.Helper()
	tc, err := configs.ServerTLSConfig{CertFile: cert, KeyFile: key}.Load()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.DialTimeout("tcp", redistest.Addr(), time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return lis.Addr().String()
}

func TestRedisOverTLS(t *testing.T) {
	ca, other := certtest.NewCA(t, "redis-ca"), certtest.NewCA(t, "other-ca")
	cert, key := ca.Server(t, "redis", "127.0.0.1")
	addr := tlsFront(t, cert, key)
	ping := func(c configs.ClientTLSConfig) error {
		t.Helper()
		tc, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		// The prefix and its cleanup come from the plain shared server;
		// the directory itself goes through the TLS endpoint.
		cfg := redistest.Config(t, "")
		cfg.Addr = addr
		d := Open(cfg, Options{TLS: tc})
		defer d.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return d.Ping(ctx)
	}
	if err := ping(configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile}); err != nil {
		t.Fatalf("TLS with the right CA: %v", err)
	}
	if err := ping(configs.ClientTLSConfig{Enabled: true, CAFile: other.CertFile}); err == nil {
		t.Fatal("TLS accepted a server signed by another CA")
	}
	if err := ping(configs.ClientTLSConfig{}); err == nil {
		t.Fatal("a plaintext client talked to the TLS endpoint")
	}
}

// A TLS client against a plaintext Redis, or against a server the CA does
// not sign or that carries another name, is a configuration mistake
// (start refuses); a Redis that is down is not.
func TestCheckTLSTellsMisconfigurationFromOutage(t *testing.T) {
	ca, other := certtest.NewCA(t, "redis-ca"), certtest.NewCA(t, "other-ca")
	cert, key := ca.Server(t, "redis", "127.0.0.1")
	tlsAddr := tlsFront(t, cert, key)
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := down.Addr().String()
	down.Close()
	check := func(addr string, c configs.ClientTLSConfig) error {
		t.Helper()
		tc, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		return CheckTLS(ctx, addr, tc)
	}
	for _, tc := range []struct {
		name    string
		addr    string
		tls     configs.ClientTLSConfig
		mistake bool
	}{
		{"TLS to a plaintext Redis", redistest.Addr(), configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile}, true},
		{"another CA", tlsAddr, configs.ClientTLSConfig{Enabled: true, CAFile: other.CertFile}, true},
		{"wrong server name", tlsAddr, configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile, ServerName: "not-redis"}, true},
		{"Redis down", downAddr, configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile}, false},
	} {
		err := check(tc.addr, tc.tls)
		if err == nil {
			t.Fatalf("%s: handshake succeeded", tc.name)
		}
		if got := errors.Is(err, ErrTLSMistake); got != tc.mistake {
			t.Errorf("%s: %v: mistake %v, want %v", tc.name, err, got, tc.mistake)
		}
	}
	if err := check(tlsAddr, configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile}); err != nil {
		t.Fatalf("right CA: %v", err)
	}
}
