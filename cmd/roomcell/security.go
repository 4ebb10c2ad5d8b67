package main

import (
	"fmt"
	"strings"
	"time"

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
	metrics, err := grpcapi.NewMetrics(a.registry)
	if err != nil {
		return grpcapi.Options{}, err
	}
	o := grpcapi.Options{
		Logger:       a.log.With("component", "grpc"),
		ClientTokens: g.Auth.ClientTokens, OperatorTokens: g.Auth.OperatorTokens,
		Metrics: metrics,
	}
	if a.traces != nil {
		o.Tracing = a.traces
	}
	if g.AuthToken != "" {
		a.log.Warn("grpc.auth_token is deprecated: it is loaded as one more operator token; move it to grpc.auth.operator_tokens and give clients grpc.auth.client_tokens")
	}
	if len(a.cfg.OpenDoors()) > 0 {
		a.warnOpenDoors()
	} else if !g.Auth.Enabled() {
		a.log.Info("grpc auth is off: no grpc.auth tokens are set; every RPC, operator ones included, is open to every process on this host (the listener is on loopback)")
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

// openDoorsWarnEvery is how often a node started with allow_insecure
// repeats what it leaves open, so the warning outlives log rotation.
var openDoorsWarnEvery = time.Hour

// warnOpenDoors logs, at WARN, what an allow_insecure node leaves open,
// at start and every openDoorsWarnEvery until shutdown.
func (a *App) warnOpenDoors() {
	doors := a.cfg.OpenDoors()
	if len(doors) == 0 {
		return
	}
	keys := make([]string, len(doors))
	for i, d := range doors {
		keys[i] = d.Key
	}
	grpcAddr, _ := a.cfg.ServingAddrs()
	warn := func() {
		a.log.Warn("allow_insecure: the gRPC listener reaches beyond loopback with these unset; anyone who reaches it may call what they guard",
			"grpc_addr", grpcAddr, "unset", strings.Join(keys, ","))
	}
	warn()
	done := make(chan struct{})
	a.closers = append(a.closers, func() { close(done) })
	go func() {
		t := time.NewTicker(openDoorsWarnEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				warn()
			}
		}
	}()
}
