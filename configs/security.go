package configs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// GRPCAuthConfig is grpc.auth: the bearer tokens of the two kinds of
// caller. Each list may hold several tokens so one can be rotated without
// downtime (add the new one, move callers, drop the old one). An entry may
// hold several comma-separated tokens, so "${ROOMCELL_CLIENT_TOKENS}" can
// carry a whole list from the environment; empty entries are dropped.
type GRPCAuthConfig struct {
	// ClientTokens open the client-facing RPCs (RoomService, GetBalances,
	// paid PurchaseVip): the app backend holds these.
	ClientTokens []string `yaml:"client_tokens"`
	// OperatorTokens open every RPC, including the operator ones (Credit,
	// DebitGift, free VIP grants, OutboxAdmin, NoticeAdmin, ClusterAdmin):
	// operators, payment callbacks and room nodes calling a remote wallet.
	OperatorTokens []string `yaml:"operator_tokens"`
}

// Enabled reports whether any token is configured; with none, every RPC
// is open (the loopback-only dev default).
func (c GRPCAuthConfig) Enabled() bool { return len(c.ClientTokens)+len(c.OperatorTokens) > 0 }

func splitTokens(in []string) []string {
	var out []string
	for _, e := range in {
		for _, t := range strings.Split(e, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

func (c GRPCAuthConfig) validate() error {
	seen := map[string]string{}
	for _, l := range []struct {
		key    string
		tokens []string
	}{{"grpc.auth.client_tokens", c.ClientTokens}, {"grpc.auth.operator_tokens", c.OperatorTokens}} {
		for i, t := range l.tokens {
			for _, r := range t {
				if r <= ' ' || r == 0x7f {
					return errorf(fmt.Sprintf("%s[%d]", l.key, i), "a token must not contain spaces or control characters")
				}
			}
			if other, dup := seen[t]; dup && other != l.key {
				// Never echo the token itself.
				return errorf(fmt.Sprintf("%s[%d]", l.key, i), "the same token is also listed in %s; a token has one class", other)
			}
			seen[t] = l.key
		}
	}
	return nil
}

// ServerTLSConfig is grpc.tls: TLS on the public gRPC listener, and mTLS
// when ClientCAFile is set.
type ServerTLSConfig struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile, when set, makes the server require a client
	// certificate signed by one of these CAs (mTLS).
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether the listener serves TLS.
func (c ServerTLSConfig) Enabled() bool { return c.CertFile != "" }

func (c ServerTLSConfig) validate(key string) error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errorf(key, "cert_file and key_file go together")
	}
	if c.ClientCAFile != "" && c.CertFile == "" {
		return errorf(key+".client_ca_file", "mTLS needs the server's own cert_file and key_file")
	}
	return nil
}

// Load reads the files into a server tls.Config (TLS 1.2 or newer).
func (c ServerTLSConfig) Load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: server certificate: %w", err)
	}
	t := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		if t.ClientCAs, err = loadPool(c.ClientCAFile); err != nil {
			return nil, err
		}
		t.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return t, nil
}

// ClientTLSConfig is the TLS a client side uses: mysql.tls, redis.tls,
// wallet.tls.
type ClientTLSConfig struct {
	Enabled bool `yaml:"enabled"`
	// CAFile holds the CAs that sign the server; "" = the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are this side's certificate when the server
	// wants one (mTLS).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked in the server's certificate;
	// "" = the host of the address dialled.
	ServerName string `yaml:"server_name"`
}

func (c ClientTLSConfig) validate(key string) error {
	if !c.Enabled {
		if c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" {
			return errorf(key+".enabled", "TLS files are set but enabled is false")
		}
		return nil
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errorf(key, "cert_file and key_file go together")
	}
	return nil
}

// Load returns the client tls.Config, or nil when TLS is off.
func (c ClientTLSConfig) Load() (*tls.Config, error) {
	if !c.Enabled {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		var err error
		if t.RootCAs, err = loadPool(c.CAFile); err != nil {
			return nil, err
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client certificate: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: CA file: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, errors.New("tls: CA file " + file + " holds no PEM certificate")
	}
	return p, nil
}

// ClusterTLSConfig is cluster.tls: mutual TLS on the members' remote
// port. Every member serves and dials with the same files: its
// certificate, signed by CAFile, must be valid as both server and client,
// and name ServerName (a name shared by all members, since they dial each
// other by address).
type ClusterTLSConfig struct {
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	CAFile     string `yaml:"ca_file"`
	ServerName string `yaml:"server_name"`
}

// Enabled reports whether members talk TLS.
func (c ClusterTLSConfig) Enabled() bool { return c.CertFile != "" }

func (c ClusterTLSConfig) validate() error {
	if !c.Enabled() && (c.KeyFile != "" || c.CAFile != "" || c.ServerName != "") {
		return errorf("cluster.tls.cert_file", "required when any other cluster.tls key is set")
	}
	if c.Enabled() && (c.KeyFile == "" || c.CAFile == "" || c.ServerName == "") {
		return errorf("cluster.tls", "cert_file, key_file, ca_file and server_name go together (members must prove membership both ways)")
	}
	return nil
}

// Load returns the member's server side (requiring a client certificate
// from CAFile) and client side.
func (c ClusterTLSConfig) Load() (server, client *tls.Config, err error) {
	if server, err = (ServerTLSConfig{CertFile: c.CertFile, KeyFile: c.KeyFile, ClientCAFile: c.CAFile}).Load(); err != nil {
		return nil, nil, err
	}
	client, err = ClientTLSConfig{Enabled: true, CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile, ServerName: c.ServerName}.Load()
	return server, client, err
}

// Loopback reports whether addr ("host:port") listens on loopback only.
// An empty host, 0.0.0.0, ::, any other address and any host name but
// "localhost" reach beyond it.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// OpenDoors lists what the serving gRPC listener leaves open to anyone
// who reaches it, one error per key: no client tokens, no operator tokens,
// no TLS. A listener on loopback has none (only this host reaches it). A
// notice-only node serves no client RPC, so it needs no client tokens.
func (c Config) OpenDoors() []*Error {
	grpcAddr, _ := c.ServingAddrs()
	if Loopback(grpcAddr) {
		return nil
	}
	var out []*Error
	beyond := fmt.Sprintf("while the gRPC listener %s reaches beyond loopback", grpcAddr)
	if !c.NoticeOnly() && len(c.GRPC.Auth.ClientTokens) == 0 {
		out = append(out, &Error{Key: "grpc.auth.client_tokens", Msg: "empty " + beyond + ": every client RPC would be open to anyone"})
	}
	if len(c.GRPC.Auth.OperatorTokens) == 0 {
		out = append(out, &Error{Key: "grpc.auth.operator_tokens", Msg: "empty " + beyond + ": every operator RPC (Credit, DebitGift, admin) would be open to anyone"})
	}
	if !c.GRPC.TLS.Enabled() {
		out = append(out, &Error{Key: "grpc.tls.cert_file", Msg: "empty " + beyond + ": tokens and traffic would cross the network in clear text"})
	}
	return out
}

// checkSecurity refuses an open door unless allow_insecure says, in so
// many words, that it is wanted; and the fake IM on a production-shaped
// node (MySQL store or etcd cluster) unless tencent_im.allow_fake does:
// such a node "works" against nothing.
func (c Config) checkSecurity() error {
	if doors := c.OpenDoors(); len(doors) > 0 && !c.AllowInsecure {
		e := *doors[0]
		e.Msg += " (set it, or allow_insecure: true to accept this)"
		return &e
	}
	if !c.TencentIM.Enabled && !c.TencentIM.AllowFake {
		var why string
		switch {
		case c.Store.Kind == StoreMySQL:
			why = "store.kind is mysql"
		case c.Cluster.Provider == ProviderEtcd:
			why = "cluster.provider is etcd"
		}
		if why != "" {
			return errorf("tencent_im.enabled", "false while %s: the node would publish every room event to the in-process fake IM, reaching no client; "+
				"set tencent_im.enabled: true with Tencent's credentials, or tencent_im.allow_fake: true to run against the fake", why)
		}
	}
	return nil
}
