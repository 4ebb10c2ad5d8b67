package configs

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// wantKey asserts err is a config error naming key (and, when given, the
// text want).
func wantKey(t *testing.T, what string, err error, key, want string) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: got %v, want an error naming %s (%q)", what, err, key, want)
	}
}

func TestUnsetVariableIsAnErrorNamingItAndTheKey(t *testing.T) {
	os.Unsetenv("RC_TEST_UNSET_TOKENS")
	os.Unsetenv("RC_TEST_UNSET_CERT")
	_, err := Parse([]byte("grpc:\n  auth:\n    client_tokens: [\"${RC_TEST_UNSET_TOKENS}\"]\n"))
	wantKey(t, "unset token variable", err, "grpc.auth.client_tokens[0]", "RC_TEST_UNSET_TOKENS")
	_, err = Parse([]byte("grpc:\n  tls:\n    cert_file: \"${RC_TEST_UNSET_CERT}\"\n    key_file: k\n"))
	wantKey(t, "unset cert variable", err, "grpc.tls.cert_file", "RC_TEST_UNSET_CERT")
	// Inside a flow mapping the raw text is no YAML: the line is named.
	_, err = Parse([]byte("log: {level: info}\ngrpc: { addr: ${RC_TEST_UNSET_CERT} }\n"))
	wantKey(t, "unset in a flow mapping", err, "line 2", "RC_TEST_UNSET_CERT")
	// A comment may mention a variable that is not set.
	if _, err := Parse([]byte("log:\n  level: info   # \"${RC_TEST_UNSET_CERT}\"\n")); err != nil {
		t.Fatalf("comment: %v", err)
	}
}

func TestExplicitDefaultsAndEmptyValues(t *testing.T) {
	os.Unsetenv("RC_TEST_UNSET_LEVEL")
	c, err := Parse([]byte("log:\n  level: \"${RC_TEST_UNSET_LEVEL:-warn}\"\n"))
	if err != nil || c.Log.Level != "warn" {
		t.Fatalf("default: level %q, %v", c.Log.Level, err)
	}
	t.Setenv("RC_TEST_LEVEL", "error")
	if c, err = Parse([]byte("log:\n  level: \"${RC_TEST_LEVEL:-warn}\"\n")); err != nil || c.Log.Level != "error" {
		t.Fatalf("set: level %q, %v", c.Log.Level, err)
	}
	// Set but empty takes the default too (the shell's :-), and is kept
	// as empty without one.
	t.Setenv("RC_TEST_LEVEL", "")
	if c, err = Parse([]byte("log:\n  level: \"${RC_TEST_LEVEL:-debug}\"\n")); err != nil || c.Log.Level != "debug" {
		t.Fatalf("empty: level %q, %v", c.Log.Level, err)
	}
	if c, err = Parse([]byte("grpc:\n  auth:\n    client_tokens: [\"${RC_TEST_LEVEL}\"]\n")); err != nil || len(c.GRPC.Auth.ClientTokens) != 0 {
		t.Fatalf("empty tokens: %q, %v", c.GRPC.Auth.ClientTokens, err)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "127.9.8.7:1": true, "[::1]:1": true, "localhost:1": true,
		"0.0.0.0:1": false, ":1": false, "[::]:1": false, "10.0.0.1:1": false, "roomcell-0:1": false, "junk": false,
	} {
		if Loopback(addr) != want {
			t.Errorf("Loopback(%q) = %v", addr, !want)
		}
	}
}

// Every dangerous configuration is refused at start with an error naming
// its key; the same on loopback (dev) starts.
func TestDangerousConfigsRefusedAtStart(t *testing.T) {
	t.Setenv("RC_TEST_EMPTY", "")
	const secure = "grpc:\n  addr: \"0.0.0.0:13001\"\n  auth: {client_tokens: [c], operator_tokens: [o]}\n  tls: {cert_file: s.crt, key_file: s.key}\n"
	for _, tc := range []struct{ name, yaml, key string }{
		{"empty token list on 0.0.0.0", "grpc:\n  addr: \"0.0.0.0:13001\"\n  auth: {operator_tokens: [o]}\n  tls: {cert_file: s.crt, key_file: s.key}\n", "grpc.auth.client_tokens"},
		{"empty token variable on 0.0.0.0", "grpc:\n  addr: \"0.0.0.0:13001\"\n  auth: {client_tokens: [c], operator_tokens: [\"${RC_TEST_EMPTY}\"]}\n  tls: {cert_file: s.crt, key_file: s.key}\n", "grpc.auth.operator_tokens"},
		{"no TLS on 0.0.0.0", "grpc:\n  addr: \":13001\"\n  auth: {client_tokens: [c], operator_tokens: [o]}\n", "grpc.tls.cert_file"},
		{"no TLS on a pod IP", "grpc:\n  addr: \"10.1.2.3:13001\"\n  auth: {client_tokens: [c], operator_tokens: [o]}\n", "grpc.tls.cert_file"},
		{"notice node without operator tokens", "roles: [notice]\nnotice:\n  grpc_addr: \"0.0.0.0:13009\"\ngrpc:\n  tls: {cert_file: s.crt, key_file: s.key}\n", "grpc.auth.operator_tokens"},
		{"fake IM with MySQL", "store: {kind: mysql}\nmysql: {dsn: \"u@tcp(db:3306)/\"}\n", "tencent_im.enabled"},
		{"fake IM with etcd", "cluster: {provider: etcd}\n", "tencent_im.enabled"},
		{"fake IM with MySQL, secure listener", secure + "store: {kind: mysql}\nmysql: {dsn: \"u@tcp(db:3306)/\"}\n", "tencent_im.enabled"},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: parse: %v", tc.name, err)
		}
		wantKey(t, tc.name, c.CheckStart(), tc.key, "")
	}

	for _, tc := range []struct{ name, yaml string }{
		{"dev default", ""},
		{"loopback without tokens or TLS", "grpc: {addr: \"127.0.0.1:13001\"}\n"},
		{"localhost without tokens", "grpc: {addr: \"localhost:0\"}\n"},
		{"wide, secure", secure},
		{"notice node with operator tokens", "roles: [notice]\nnotice:\n  grpc_addr: \"0.0.0.0:13009\"\ngrpc:\n  auth: {operator_tokens: [o]}\n  tls: {cert_file: s.crt, key_file: s.key}\n"},
		{"wide, insecure by choice", "allow_insecure: true\ngrpc: {addr: \"0.0.0.0:13001\"}\n"},
		{"fake IM allowed with MySQL", "store: {kind: mysql}\nmysql: {dsn: \"u@tcp(db:3306)/\"}\ntencent_im: {allow_fake: true}\n"},
		{"real IM with etcd", "cluster: {provider: etcd}\ntencent_im: {enabled: true, sdk_app_id: 1, secret_key: k}\n"},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: parse: %v", tc.name, err)
		}
		if err := c.CheckStart(); err != nil {
			t.Errorf("%s: refused: %v", tc.name, err)
		}
	}
	// allow_insecure does not hide the open doors: the node lists them to
	// warn about.
	c, _ := Parse([]byte("allow_insecure: true\ngrpc: {addr: \"0.0.0.0:13001\"}\n"))
	if d := c.OpenDoors(); len(d) != 3 {
		t.Fatalf("open doors %v, want client tokens, operator tokens and TLS", d)
	}
}

// Every listener is limited by default, and the file's values win.
func TestListenerLimitsDefaults(t *testing.T) {
	d := Default()
	g, h := d.GRPC.Limits, d.HTTP.Limits
	if g.MaxConnections != 8192 || g.MaxConnectionsPerAddress != 512 || g.MaxConnectionIdle != 5*time.Minute ||
		g.MaxConnectionAge != time.Hour || g.KeepaliveMinTime != 10*time.Second || g.HandshakeTimeout != 10*time.Second {
		t.Fatalf("grpc limits %+v", g)
	}
	if h.MaxConnections != 256 || h.MaxConnectionsPerAddress != 64 || h.IdleTimeout != time.Minute {
		t.Fatalf("http limits %+v", h)
	}
	c, err := Parse([]byte("grpc:\n  limits: {max_connections: 10, max_connections_per_address: 2, max_connection_idle: 1s}\n"))
	if err != nil || c.GRPC.Limits.MaxConnections != 10 || c.GRPC.Limits.MaxConnectionsPerAddress != 2 || c.GRPC.Limits.MaxConnectionIdle != time.Second {
		t.Fatalf("parsed limits %+v, %v", c.GRPC.Limits, err)
	}
}

// etcd TLS allows no plaintext endpoint; user and password go together.
func TestEtcdTLSAndAuthConfig(t *testing.T) {
	_, err := Parse([]byte("cluster:\n  etcd_endpoints: [\"https://a:2379\", \"http://b:2379\"]\n  etcd_tls: {enabled: true}\n"))
	wantKey(t, "http endpoint with TLS", err, "cluster.etcd_endpoints[1]", "plaintext")
	_, err = Parse([]byte("cluster:\n  etcd_username: roomcell\n"))
	wantKey(t, "user without password", err, "cluster.etcd_username", "go together")
	_, err = Parse([]byte("cluster:\n  etcd_tls: {ca_file: ca.pem}\n"))
	wantKey(t, "TLS files while off", err, "cluster.etcd_tls.enabled", "")
	c, err := Parse([]byte("cluster:\n  etcd_endpoints: [\"a:2379\"]\n  etcd_tls: {enabled: true, ca_file: ca.pem}\n  etcd_username: u\n  etcd_password: p\n"))
	if err != nil || !c.Cluster.EtcdTLS.Enabled || c.Cluster.EtcdUsername != "u" {
		t.Fatalf("etcd TLS config: %+v, %v", c.Cluster, err)
	}
}
