package configs

import (
	"strings"
	"testing"
)

// The plain-HTTP gateway fails closed beyond loopback without tokens,
// and with client certificates it cannot present.
func TestGatewayFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		tokens []string
		ca     string
		bad    bool
	}{
		{"", nil, "", false},
		{"127.0.0.1:13201", nil, "", false},
		{"localhost:13201", nil, "", false},
		{"[::1]:13201", nil, "", false},
		{"0.0.0.0:13201", nil, "", true},
		{"10.0.0.5:13201", nil, "", true},
		{"0.0.0.0:13201", []string{"t"}, "", false},
		{"127.0.0.1:13201", nil, "ca.pem", true},
		{"nonsense", nil, "", true},
	} {
		c := Default()
		c.Gateway.Addr = tc.addr
		c.GRPC.Auth.ClientTokens = tc.tokens
		c.GRPC.TLS.ClientCAFile = tc.ca
		err := c.Gateway.validate(c.GRPC)
		if (err != nil) != tc.bad || err != nil && !strings.Contains(err.Error(), "gateway.addr") {
			t.Errorf("%+v: %v", tc, err)
		}
	}
}

// The door's limits: defaults set, a body cap past the gRPC message limit
// and a write timeout that would cut a command's reply refused by key.
func TestGatewayLimits(t *testing.T) {
	c := Default()
	if c.Gateway.MaxBodyBytes != 64<<10 || c.Gateway.ReadTimeout <= 0 || c.Gateway.WriteTimeout <= c.GRPC.CommandTimeout || c.Gateway.IdleTimeout <= 0 {
		t.Fatalf("defaults %+v", c.Gateway)
	}
	for key, edit := range map[string]func(*Config){
		"gateway.max_body_bytes": func(c *Config) { c.Gateway.MaxBodyBytes = 5 << 20 },
		"gateway.write_timeout":  func(c *Config) { c.Gateway.WriteTimeout = c.GRPC.CommandTimeout },
	} {
		c := Default()
		c.Gateway.Addr = "127.0.0.1:13201"
		edit(&c)
		if err := c.Gateway.validate(c.GRPC); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", key, err)
		}
	}
}
