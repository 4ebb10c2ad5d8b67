package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// ErrTLSMistake: the server accepted the connection but the TLS handshake
// failed (a plaintext server, which never answers a ClientHello; a
// certificate the configured CA does not sign; a name it does not carry;
// a client certificate refused). It is a configuration mistake and
// refuses start, as MySQL's does; a Redis that does not accept the
// connection at all is an outage the rooms repair once it is back.
var ErrTLSMistake = errors.New("redis: TLS handshake failed against a server that accepted the connection")

// CheckTLS dials addr and completes a TLS handshake with tc within ctx. It
// wraps ErrTLSMistake when the TCP connection was made and the handshake
// was not, and returns the dial error as it is otherwise.
func CheckTLS(ctx context.Context, addr string, tc *tls.Config) error {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("redis: dial %s: %w", addr, err)
	}
	defer raw.Close()
	tc = tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName, _, _ = net.SplitHostPort(addr)
	}
	c := tls.Client(raw, tc)
	if err := c.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrTLSMistake, addr, err)
	}
	return nil
}
