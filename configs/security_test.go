package configs

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestAuthTokensFromEnvAndLegacyToken(t *testing.T) {
	t.Setenv("CLIENT_TOKENS", " c-one, c-two ,")
	t.Setenv("UNSET_TOKENS", "")
	c, err := Parse([]byte("grpc:\n  auth_token: \"legacy-tok\"\n  auth:\n    client_tokens: [\"${CLIENT_TOKENS}\", \"c-three\"]\n    operator_tokens: [\"${UNSET_TOKENS}\", \"op-one\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c-one", "c-two", "c-three"}; !reflect.DeepEqual(c.GRPC.Auth.ClientTokens, want) {
		t.Fatalf("client tokens %q, want %q", c.GRPC.Auth.ClientTokens, want)
	}
	// The old single token opened everything; it still does, as an
	// operator token.
	if want := []string{"op-one", "legacy-tok"}; !reflect.DeepEqual(c.GRPC.Auth.OperatorTokens, want) {
		t.Fatalf("operator tokens %q, want %q", c.GRPC.Auth.OperatorTokens, want)
	}
	if !c.GRPC.Auth.Enabled() {
		t.Fatal("auth off with tokens set")
	}
	if d := Default(); d.GRPC.Auth.Enabled() || len(d.GRPC.Auth.OperatorTokens) != 0 {
		t.Fatalf("default config has tokens: %+v", d.GRPC.Auth)
	}
}

func TestSameTokenInBothListsIsRefusedWithoutEchoingIt(t *testing.T) {
	_, err := Parse([]byte("grpc:\n  auth:\n    client_tokens: [\"same-tok\"]\n    operator_tokens: [\"same-tok\"]\n"))
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "grpc.auth.operator_tokens[0]" || strings.Contains(err.Error(), "same-tok") {
		t.Fatalf("got %v, want an error naming grpc.auth.operator_tokens[0] without the token", err)
	}
}

func TestTLSFilesMissingAreErrors(t *testing.T) {
	if _, err := (ServerTLSConfig{CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key"}).Load(); err == nil {
		t.Fatal("missing server certificate loaded")
	}
	if _, err := (ClientTLSConfig{Enabled: true, CAFile: "/nonexistent.crt"}).Load(); err == nil {
		t.Fatal("missing CA loaded")
	}
	if c, err := (ClientTLSConfig{}).Load(); c != nil || err != nil {
		t.Fatalf("TLS off: %v %v, want nil nil", c, err)
	}
}
