package main

import (
	"strings"
	"testing"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/internal/certtest"
)

// roomctl sends the operator token on operator RPCs and the client token
// on client RPCs, over mTLS.
func TestRoomctlTokensByMethodOverMutualTLS(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	cert, key := ca.Server(t, "server", "127.0.0.1")
	ccert, ckey := ca.Client(t, "roomctl")
	tc, err := configs.ServerTLSConfig{CertFile: cert, KeyFile: key, ClientCAFile: ca.CertFile}.Load()
	if err != nil {
		t.Fatal(err)
	}
	addr := startWalletTestServer(t, grpcapi.Options{ClientTokens: []string{"ctl-client"}, OperatorTokens: []string{"ctl-operator"}, TLS: tc})
	tlsArgs := []string{"--ca", ca.CertFile, "--cert", ccert, "--key", ckey}
	credit := []string{"wallet", "credit", "--app", "a", "--user", "u1", "--amount", "50", "--command-id", "k1"}
	balance := []string{"wallet", "balance", "--app", "a", "--user", "u1"}
	args := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"plaintext", args([]string{"--operator-token", "ctl-operator"}, credit), 1, "Unavailable"},
		{"TLS without client cert", args([]string{"--ca", ca.CertFile, "--operator-token", "ctl-operator"}, credit), 1, "Unavailable"},
		{"client token on credit", args(tlsArgs, []string{"--token", "ctl-client"}, credit), 1, "PermissionDenied"},
		{"balance before", args(tlsArgs, []string{"--token", "ctl-client"}, balance), 0, "available 0"},
		{"both tokens, credit", args(tlsArgs, []string{"--token", "ctl-client", "--operator-token", "ctl-operator"}, credit), 0, "credited 50 COIN"},
		{"client token on balance", args(tlsArgs, []string{"--token", "ctl-client"}, balance), 0, "available 50"},
		{"operator token alone on balance", args(tlsArgs, []string{"--operator-token", "ctl-operator"}, balance), 0, "available 50"},
		{"no token", args(tlsArgs, balance), 1, "Unauthenticated"},
	} {
		code, out, errOut := runCtl(t, addr, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.contains) {
			t.Errorf("%s: exit %d, out %q, err %q; want exit %d containing %q", tc.name, code, out, errOut, tc.code, tc.contains)
		}
	}
}
