package mq

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/certtest"
)

// natsTLS starts a nats-server of the test's own (own port, temp dir)
// that requires TLS with cert/key, and returns its URL.
func natsTLS(t *testing.T, cert, key string) string {
	t.Helper()
	// deploy/local/services.sh installs Debian's nats-server (in
	// /usr/sbin, which a non-login PATH may lack): a missing one fails.
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = "/usr/sbin/nats-server"
		if _, statErr := os.Stat(bin); statErr != nil {
			t.Fatalf("nats-server not found (run deploy/local/services.sh): %v", err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", filepath.Join(dir, "js"),
		"--tls", "--tlscert", cert, "--tlskey", key)
	logf, _ := os.Create(filepath.Join(dir, "nats.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nats-server with TLS did not come up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "nats://" + addr
}

// NATS over TLS: the right CA works end to end; another CA, a plaintext
// client, and a TLS client against a plaintext server are all refused;
// nothing falls back to plaintext.
func TestJetStreamOverTLS(t *testing.T) {
	ca, other := certtest.NewCA(t, "nats-ca"), certtest.NewCA(t, "other-ca")
	cert, key := ca.Server(t, "nats", "127.0.0.1")
	url := natsTLS(t, cert, key)
	dialWith := func(url string, tls configs.ClientTLSConfig) (*JetStream, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return DialJetStream(ctx, configs.MQConfig{Enabled: true, Kind: configs.MQKindNATS, Servers: []string{url}, TLS: tls}, WithLogger(quiet))
	}
	js, err := dialWith(url, configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile})
	if err != nil {
		t.Fatalf("right CA: %v", err)
	}
	defer js.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := js.Publish(ctx, "tls_topic", "t", "k1", []byte("over tls")); err != nil {
		t.Fatalf("publish over TLS: %v", err)
	}
	refused := map[string]func() (*JetStream, error){
		"another CA": func() (*JetStream, error) {
			return dialWith(url, configs.ClientTLSConfig{Enabled: true, CAFile: other.CertFile})
		},
		"plaintext client": func() (*JetStream, error) { return dialWith(url, configs.ClientTLSConfig{}) },
		"TLS against plaintext NATS": func() (*JetStream, error) {
			return dialWith(plainURL(), configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile})
		},
	}
	for name, dial := range refused {
		j, err := dial()
		if err == nil {
			j.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		t.Logf("%s: refused: %v", name, err)
	}
}

// plainURL is the machine's plaintext NATS.
func plainURL() string {
	if url := os.Getenv(EnvNATS); url != "" {
		return url
	}
	return "nats://127.0.0.1:4222"
}
