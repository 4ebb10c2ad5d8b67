package main

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
)

// grpcOptions turns grpc.auth and grpc.tls into server options and says
// in the log what a reader of the config might miss.
func (a *App) grpcOptions() (grpcapi.Options, error) {
	g := a.cfg.GRPC
	o := grpcapi.Options{
		Logger:       a.log.With("component", "grpc"),
		ClientTokens: g.Auth.ClientTokens, OperatorTokens: g.Auth.OperatorTokens,
	}
	if g.AuthToken != "" {
		a.log.Warn("grpc.auth_token is deprecated: it is loaded as one more operator token; move it to grpc.auth.operator_tokens and give clients grpc.auth.client_tokens")
	}
	if !g.Auth.Enabled() {
		a.log.Warn("grpc auth is off: no grpc.auth tokens are set, so every RPC, operator ones included, is open to anyone who reaches grpc.addr")
	}
	if g.TLS.Enabled() {
		t, err := g.TLS.Load()
		if err != nil {
			return o, fmt.Errorf("grpc.tls: %w", err)
		}
		o.TLS = t
	}
	return o, nil
}

// walletDialOptions: DebitGift is operator-only, so a room node calling a
// remote wallet sends wallet.auth_token, over wallet.tls when enabled.
func walletDialOptions(c configs.WalletConfig) ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	t, err := c.TLS.Load()
	if err != nil {
		return nil, fmt.Errorf("wallet.tls: %w", err)
	}
	if t != nil {
		creds = credentials.NewTLS(t)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if c.AuthToken != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(grpcapi.BearerToken(c.AuthToken)))
	}
	return opts, nil
}
