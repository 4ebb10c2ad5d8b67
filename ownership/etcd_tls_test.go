package ownership

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/certtest"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// etcdTLS starts an etcd of the test's own (own ports, temp dir) serving
// clients over TLS only and requiring client certificates from ca, with
// auth enabled for user roomcell (password "pw"). It returns the client
// endpoint.
func etcdTLS(t *testing.T, ca *certtest.CA) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcd not found (deploy/local/services.sh installs etcd-server): %v", err)
	}
	cert, key := ca.Server(t, "etcd", "127.0.0.1")
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	cmd := exec.Command(bin, "--name", "tls", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", fmt.Sprintf("https://127.0.0.1:%d", client),
		"--advertise-client-urls", fmt.Sprintf("https://127.0.0.1:%d", client),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("tls=http://127.0.0.1:%d", peer),
		"--cert-file", cert, "--key-file", key, "--trusted-ca-file", ca.CertFile, "--client-cert-auth", "--bcrypt-cost", "4")
	logf, _ := os.Create(filepath.Join(dir, "etcd.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	endpoint := fmt.Sprintf("127.0.0.1:%d", client)
	ccert, ckey := ca.Client(t, "admin")
	tc, err := configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile, CertFile: ccert, KeyFile: ckey}.Load()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, err := admin.Get(ctx, "probe"); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("etcd with TLS did not come up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "roomcell", "pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "roomcell", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("etcd auth setup: %v", err)
		}
	}
	return endpoint
}

// Shard leases over etcd with TLS, client certificates and auth: the
// right CA, certificate and password work; another CA, no client
// certificate, plaintext and a wrong password are all refused, and
// nothing falls back to plaintext.
func TestEtcdOverTLSWithAuth(t *testing.T) {
	ca, other := certtest.NewCA(t, "etcd-ca"), certtest.NewCA(t, "other-ca")
	endpoint := etcdTLS(t, ca)
	ccert, ckey := ca.Client(t, "roomcell")
	nobodyCert, nobodyKey := ca.Client(t, "nobody")
	load := func(c configs.ClientTLSConfig) *tls.Config {
		tc, err := c.Load()
		if err != nil {
			t.Fatal(err)
		}
		return tc
	}
	good := load(configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile, CertFile: ccert, KeyFile: ckey})
	try := func(tc *tls.Config, user, pw string) error {
		e, err := NewEtcd(EtcdConfig{Endpoints: []string{endpoint}, TLS: tc, Username: user, Password: pw,
			Prefix: "/tls-test", NodeID: "n1", Shards: 8, TTL: 2 * time.Second, Margin: 500 * time.Millisecond})
		if err != nil {
			return err
		}
		defer e.client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := e.client.Put(ctx, "/tls-test/probe", "x"); err != nil {
			return err
		}
		_, err = e.client.Get(ctx, "/tls-test/probe")
		return err
	}
	if err := try(good, "roomcell", "pw"); err != nil {
		t.Fatalf("right CA, client certificate and password: %v", err)
	}
	for name, err := range map[string]error{
		"another CA":            try(load(configs.ClientTLSConfig{Enabled: true, CAFile: other.CertFile, CertFile: ccert, KeyFile: ckey}), "roomcell", "pw"),
		"no client certificate": try(load(configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile}), "roomcell", "pw"),
		"plaintext":             try(nil, "roomcell", "pw"),
		"wrong password":        try(good, "roomcell", "not-pw"),
		// etcd takes a client certificate's CN as the user when no
		// password is given: a certificate of no user gets nothing.
		"no password, certificate of no user": try(load(configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile, CertFile: nobodyCert, KeyFile: nobodyKey}), "", ""),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		t.Logf("%s: refused: %v", name, err)
	}
}
