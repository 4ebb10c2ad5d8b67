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
}

func (c *LogConfig) setDefaults() {
	if c.Level == "" {
		c.Level = "info"
	}
	if c.Format == "" {
		c.Format = "text"
	}
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
	// AuthToken, when set, is the bearer token every RPC must carry
	// (metadata "authorization: Bearer <token>"). Use ${ENV}.
	AuthToken string `yaml:"auth_token"`
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
}

func (c GRPCConfig) validate() error { return checkAddr("grpc.addr", c.Addr) }

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
