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
	// ReadHeaderTimeout bounds a request's headers (slow-header clients).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
}

func (c *GatewayConfig) setDefaults() {
	c.ReadHeaderTimeout = durationOr(c.ReadHeaderTimeout, 5*time.Second)
}

// validate fails closed: the gateway speaks plain HTTP, so beyond
// loopback it needs the gRPC API's tokens (and a TLS-terminating proxy in
// front; README "HTTP/JSON gateway").
func (c GatewayConfig) validate(g GRPCConfig) error {
	if c.Addr == "" {
		return nil
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
