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
