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
	// RepeatInterval: a WARN/ERROR with the same message and root error
	// is written once per interval, the next one with repeated=N.
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
}

func (c *GRPCConfig) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:13001"
	}
	c.CommandTimeout = durationOr(c.CommandTimeout, 5*time.Second)
	c.ShutdownTimeout = durationOr(c.ShutdownTimeout, 10*time.Second)
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
}

func (c *HTTPConfig) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:13101"
	}
}

func (c HTTPConfig) validate() error { return checkAddr("http.addr", c.Addr) }

func checkAddr(key, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return errorf(key, "not a host:port address: %q", addr)
	}
	return nil
}
