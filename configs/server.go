package configs

import (
	"log/slog"
	"net"
	"time"
)

// LogConfig: log.level is debug|info|warn|error, log.format text|json.
type LogConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
	// RepeatInterval: a line of any level with the same level, message
	// and root error (without an error: the same attributes) is written
	// once per interval, the next one with repeated=N.
	RepeatInterval time.Duration `yaml:"repeat_interval"`
}

func (c *LogConfig) setDefaults() {
	if c.Level == "" {
		c.Level = "info"
	}
	if c.Format == "" {
		c.Format = "text"
	}
	c.RepeatInterval = durationOr(c.RepeatInterval, 10*time.Second)
}

func (c LogConfig) validate() error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.Level)); err != nil {
		return errorf("log.level", "unknown level %q (want debug, info, warn or error)", c.Level)
	}
	if c.Format != "text" && c.Format != "json" {
		return errorf("log.format", "unknown format %q (want text or json)", c.Format)
	}
	return nil
}

// SlogLevel returns the parsed level.
func (c LogConfig) SlogLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.Level))
	return l
}

// GRPCConfig is the public gRPC listener.
type GRPCConfig struct {
	Addr string `yaml:"addr"`
	// Auth holds the client and operator bearer tokens (metadata
	// "authorization: Bearer <token>"). Use ${ENV}.
	Auth GRPCAuthConfig `yaml:"auth"`
	// AuthToken is the pre-split single token. Deprecated: it still loads,
	// as one more operator token (it opened every RPC, and still does);
	// move it to auth.operator_tokens and give clients auth.client_tokens.
	AuthToken string `yaml:"auth_token"`
	// TLS on the listener; off when cert_file is empty.
	TLS ServerTLSConfig `yaml:"tls"`
	// CommandTimeout bounds one command end to end (grain, wallet, store).
	CommandTimeout time.Duration `yaml:"command_timeout"`
	// ShutdownTimeout bounds GracefulStop before a hard Stop.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Limits bound the connections of the listener (README "Connection
	// limits").
	Limits GRPCLimits `yaml:"limits"`
	// MaxLikeStreams caps the LikeStream streams open at once on the
	// node; past it a new one is refused with RESOURCE_EXHAUSTED
	// (LIKE_STREAM_LIMIT) and the client opens it on another node or
	// calls LikeRoom. Default 10000.
	MaxLikeStreams int `yaml:"max_like_streams"`
	// LikeStreamIdle ends a LikeStream that sent no like and is owed no
	// ack this long (with OK; the client opens another when its member
	// likes again). Default 1m, 1s..1h.
	LikeStreamIdle time.Duration `yaml:"like_stream_idle"`
}

// ListenerLimits cap a listener's connections. Past the per-address cap
// a new connection is closed at once (roomcell_listener_refused_total);
// at the total cap, when its address holds fewer than the address holding
// the most, that address's least recently active one is closed for it
// instead (shed: roomcell_listener_shed_total), so an idle flood cannot
// lock newcomers out;
// a WARN at most every 10s. A value <= 0 falls back to the default.
type ListenerLimits struct {
	MaxConnections           int `yaml:"max_connections"`
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
}

// GRPCLimits are grpc.limits: the connection caps, and the idle, age,
// handshake and keepalive rules of every connection. A duration <= 0
// falls back to its default.
type GRPCLimits struct {
	ListenerLimits `yaml:",inline"`
	// MaxConnectionIdle: a connection without an RPC this long is closed
	// (GOAWAY). Default 5m.
	MaxConnectionIdle time.Duration `yaml:"max_connection_idle"`
	// MaxConnectionAge: a connection is asked to close (GOAWAY) after
	// this long, its RPCs given MaxConnectionAgeGrace to end. Defaults 1h
	// and 30s (above grpc.command_timeout).
	MaxConnectionAge      time.Duration `yaml:"max_connection_age"`
	MaxConnectionAgeGrace time.Duration `yaml:"max_connection_age_grace"`
	// HandshakeTimeout bounds TLS and the HTTP/2 preface of a new
	// connection. Default 10s.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// KeepaliveTime: the server pings a connection silent this long and
	// closes it when no answer comes in KeepaliveTimeout. Defaults 1m, 20s.
	KeepaliveTime    time.Duration `yaml:"keepalive_time"`
	KeepaliveTimeout time.Duration `yaml:"keepalive_timeout"`
	// KeepaliveMinTime: a client pinging more often than this is closed
	// (too_many_pings); pings without an RPC in flight are allowed.
	// Default 10s.
	KeepaliveMinTime time.Duration `yaml:"keepalive_min_time"`
	// MaxConcurrentStreams caps the RPCs in flight on one connection
	// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); default 128.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
}

func (c *GRPCLimits) setDefaults() {
	c.MaxConnections = intOr(c.MaxConnections, 8192)
	c.MaxConnectionsPerAddress = intOr(c.MaxConnectionsPerAddress, 512)
	c.MaxConnectionIdle = durationOr(c.MaxConnectionIdle, 5*time.Minute)
	c.MaxConnectionAge = durationOr(c.MaxConnectionAge, time.Hour)
	c.MaxConnectionAgeGrace = durationOr(c.MaxConnectionAgeGrace, 30*time.Second)
	c.HandshakeTimeout = durationOr(c.HandshakeTimeout, 10*time.Second)
	c.KeepaliveTime = durationOr(c.KeepaliveTime, time.Minute)
	c.KeepaliveTimeout = durationOr(c.KeepaliveTimeout, 20*time.Second)
	c.KeepaliveMinTime = durationOr(c.KeepaliveMinTime, 10*time.Second)
	c.MaxConcurrentStreams = intOr(c.MaxConcurrentStreams, 128)
}

// HTTPLimits are http.limits: the ops listener's caps and timeouts.
type HTTPLimits struct {
	ListenerLimits `yaml:",inline"`
	// IdleTimeout closes a keep-alive connection idle this long; default
	// 60s. ReadTimeout bounds reading one request; default 10s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	ReadTimeout time.Duration `yaml:"read_timeout"`
}

func (c *HTTPLimits) setDefaults() {
	c.MaxConnections = intOr(c.MaxConnections, 256)
	c.MaxConnectionsPerAddress = intOr(c.MaxConnectionsPerAddress, 64)
	c.IdleTimeout = durationOr(c.IdleTimeout, time.Minute)
	c.ReadTimeout = durationOr(c.ReadTimeout, 10*time.Second)
}

func (c *GRPCConfig) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:13001"
	}
	c.CommandTimeout = durationOr(c.CommandTimeout, 5*time.Second)
	c.ShutdownTimeout = durationOr(c.ShutdownTimeout, 10*time.Second)
	// Only unset takes the default: a negative value is refused by
	// validate, naming its key.
	if c.MaxLikeStreams == 0 {
		c.MaxLikeStreams = 10000
	}
	if c.LikeStreamIdle == 0 {
		c.LikeStreamIdle = time.Minute
	}
	c.Limits.setDefaults()
	c.Auth.ClientTokens = splitTokens(c.Auth.ClientTokens)
	c.Auth.OperatorTokens = splitTokens(append(c.Auth.OperatorTokens, c.AuthToken))
}

func (c GRPCConfig) validate() error {
	if err := checkAddr("grpc.addr", c.Addr); err != nil {
		return err
	}
	if err := c.Auth.validate(); err != nil {
		return err
	}
	if c.MaxLikeStreams < 0 {
		return errorf("grpc.max_like_streams", "must be positive, got %d", c.MaxLikeStreams)
	}
	if c.LikeStreamIdle < time.Second || c.LikeStreamIdle > time.Hour {
		return errorf("grpc.like_stream_idle", "must be between 1s and 1h, got %s", c.LikeStreamIdle)
	}
	return c.TLS.validate("grpc.tls")
}

// HTTPConfig is the ops listener: /healthz, /readyz, /metrics, and
// /debug/pprof when Pprof is set.
type HTTPConfig struct {
	Addr string `yaml:"addr"`
	// Pprof serves Go's profiler under /debug/pprof (off by default: it
	// exposes heap contents and costs CPU while a profile runs; turn it on
	// for a measurement and keep the port private).
	Pprof bool `yaml:"pprof"`
	// Limits bound the listener's connections.
	Limits HTTPLimits `yaml:"limits"`
	// Readiness paces the probes behind /readyz.
	Readiness ReadinessConfig `yaml:"readiness"`
}

// ReadinessConfig paces the dependency probes of /readyz (the room store
// answers a ping, the cluster member is serving, the shard lease is
// renewed). They run in the background every ProbeInterval (default 2s),
// each bounded by ProbeTimeout (default 1s); /readyz answers from the
// last round at once, and a round older than two intervals plus the
// timeout counts as failed, so a hung probe makes the node unready, never
// /readyz slow.
type ReadinessConfig struct {
	ProbeInterval time.Duration `yaml:"probe_interval"`
	ProbeTimeout  time.Duration `yaml:"probe_timeout"`
}

func (c *HTTPConfig) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:13101"
	}
	c.Limits.setDefaults()
	c.Readiness.ProbeInterval = durationOr(c.Readiness.ProbeInterval, 2*time.Second)
	c.Readiness.ProbeTimeout = durationOr(c.Readiness.ProbeTimeout, time.Second)
}

func (c HTTPConfig) validate() error { return checkAddr("http.addr", c.Addr) }

func checkAddr(key, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return errorf(key, "not a host:port address: %q", addr)
	}
	return nil
}
