package configs

import (
	"net"
	"time"
)

// GatewayConfig is the gateway block: the client API (RoomService) as
// HTTP/JSON, generated from the proto by grpc-gateway
// (api/roomcellv1/gateway.yaml has the routes). Requests go through the
// gRPC server in process, so the tokens, checks and errors are the gRPC
// API's.
type GatewayConfig struct {
	// Addr is the HTTP listener; "" = off (the default).
	Addr string `yaml:"addr"`
	// MaxBodyBytes bounds a request's body: past it the answer is 413
	// REQUEST_TOO_LARGE, before anything is decoded. Default 64 KiB, at
	// most 4 MiB (the gRPC message limit).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ReadHeaderTimeout bounds a request's headers (slow-header clients),
	// ReadTimeout the whole request with its body (a slower body is
	// answered 408 REQUEST_TIMEOUT and its connection closed).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds a reply (a WatchRoom stream is exempt); it must
	// exceed grpc.command_timeout.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// maxGatewayBody is the gRPC server's message limit: a larger body could
// pass the gateway only to be refused by grpc-go.
const maxGatewayBody = 4 << 20

func (c *GatewayConfig) setDefaults() {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 64 << 10
	}
	c.ReadHeaderTimeout = durationOr(c.ReadHeaderTimeout, 5*time.Second)
	c.ReadTimeout = durationOr(c.ReadTimeout, 10*time.Second)
	c.WriteTimeout = durationOr(c.WriteTimeout, 30*time.Second)
	c.IdleTimeout = durationOr(c.IdleTimeout, time.Minute)
}

// validate fails closed: the gateway speaks plain HTTP, so beyond
// loopback it needs the gRPC API's tokens (and a TLS-terminating proxy in
// front; README "HTTP/JSON gateway").
func (c GatewayConfig) validate(g GRPCConfig) error {
	if c.Addr == "" {
		return nil
	}
	if c.MaxBodyBytes < 0 || c.MaxBodyBytes > maxGatewayBody {
		return errorf("gateway.max_body_bytes", "%d is outside 1..%d", c.MaxBodyBytes, maxGatewayBody)
	}
	if c.WriteTimeout <= g.CommandTimeout {
		return errorf("gateway.write_timeout", "%s is not above grpc.command_timeout %s: replies would be cut", c.WriteTimeout, g.CommandTimeout)
	}
	auth := g.Auth
	if g.TLS.ClientCAFile != "" {
		// The gateway calls the gRPC server in process, with no client
		// certificate to show.
		return errorf("gateway.addr", "the gateway cannot serve while grpc.tls.client_ca_file requires client certificates")
	}
	if err := checkAddr("gateway.addr", c.Addr); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(c.Addr)
	ip := net.ParseIP(host)
	loopback := host == "localhost" || ip != nil && ip.IsLoopback()
	if !loopback && !auth.Enabled() {
		return errorf("gateway.addr", "%s is beyond loopback and grpc.auth has no tokens: the HTTP API would be open to anyone", c.Addr)
	}
	return nil
}
