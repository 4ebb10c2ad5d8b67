package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/wallet"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/internal/certtest"
	"github.com/hyapp/roomcell/persistence/memdb"
)

const (
	clientTok   = "e2e-client-token"
	operatorTok = "e2e-operator-token"
)

func withToken(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// The process wires both token lists and refuses what the table says,
// on the real servers.
func TestProcessSeparatesClientAndOperatorCalls(t *testing.T) {
	app, rc := startDev(t, func(c *configs.Config) {
		c.GRPC.Auth = configs.GRPCAuthConfig{ClientTokens: []string{clientTok}, OperatorTokens: []string{operatorTok}}
	})
	ctx := ctxT(t)
	wc := walletClient(t, app)
	credit := &v1.WalletCreditRequest{CommandId: "mint-1", AppCode: "a", UserId: "alice", AssetType: "COIN", Amount: 1 << 40}
	_, err := wc.Credit(ctx, credit)
	wantCode(t, err, codes.Unauthenticated, "Credit without a token")
	_, err = wc.Credit(withToken(ctx, clientTok), credit)
	wantCode(t, err, codes.PermissionDenied, "Credit with a client token")
	_, err = wc.DebitGift(withToken(ctx, clientTok), &v1.WalletDebitGiftRequest{CommandId: "d1", AppCode: "a", RoomId: "nowhere", FromUserId: "alice", ToUserId: "bob", GiftId: "rose", GiftCount: 1})
	wantCode(t, err, codes.PermissionDenied, "DebitGift with a client token")
	b, err := wc.GetBalances(withToken(ctx, clientTok), &v1.WalletGetBalancesRequest{AppCode: "a", UserId: "alice"})
	if err != nil || coin(b) != 0 {
		t.Fatalf("balance after refused credits: %v %v, want 0 COIN", b, err)
	}
	if _, err := wc.Credit(withToken(ctx, operatorTok), &v1.WalletCreditRequest{CommandId: "topup-1", AppCode: "a", UserId: "alice", AssetType: "COIN", Amount: 100}); err != nil {
		t.Fatalf("Credit with the operator token: %v", err)
	}
	_, err = v1.NewOutboxAdminClient(dialApp(t, app)).ListOutbox(withToken(ctx, clientTok), &v1.ListOutboxRequest{})
	wantCode(t, err, codes.PermissionDenied, "ListOutbox with a client token")
	_, err = rc.CreateRoom(withToken(ctx, clientTok), &v1.CreateRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r1", UserId: "alice", Name: "n"})
	if err != nil {
		t.Fatalf("CreateRoom with a client token: %v", err)
	}
	_, err = rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: "a", RoomId: "r1"})
	wantCode(t, err, codes.Unauthenticated, "GetRoom without a token")

	// A garbage body on the real wallet and admin servers is the caller's
	// fault, not Internal.
	conn := dialApp(t, app)
	for _, m := range []string{v1.WalletService_Credit_FullMethodName, v1.OutboxAdmin_ListOutbox_FullMethodName, v1.ClusterAdmin_Members_FullMethodName} {
		var in, out []byte = []byte{0xff, 0xff, 0xff}, nil
		err := conn.Invoke(withToken(ctx, operatorTok), m, &in, &out, grpc.ForceCodecV2(rawBytes{}))
		wantCode(t, err, codes.InvalidArgument, m+" with a garbage body")
	}
}

func dialApp(t *testing.T, app *App, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(app.GRPCAddr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// A room node whose wallet is remote reaches the operator-only DebitGift
// with wallet.auth_token over wallet.tls.
func TestRemoteWalletTakesOperatorTokenOverTLS(t *testing.T) {
	remoteWalletGift(t, operatorTok, codes.OK, 90)
}

// A room node holding a client token is a misconfiguration: the wallet
// refuses it (PermissionDenied), which the gift path reports as
// Unavailable (retry once fixed; the node logs which setting is wrong),
// never Internal; nothing is charged.
func TestRemoteWalletRefusesNodeWithClientToken(t *testing.T) {
	remoteWalletGift(t, clientTok, codes.Unavailable, 100)
}

// remoteWalletGift runs one gift through a dev node whose wallet is a
// TLS WalletService it reaches with token, and checks the gift's code and
// alice's COIN afterwards (she starts with 100; a rose costs 10).
//
// One node per test, started before any gRPC connection of the test
// exists: Proto.Actor's remote.Start sets the process-global grpclog
// logger, which races with gRPC goroutines already running, and -race fails the test on it.
func remoteWalletGift(t *testing.T, token string, want codes.Code, wantCoin int64) {
	ca := certtest.NewCA(t, "wallet-ca")
	cert, key := ca.Server(t, "wallet", "127.0.0.1")
	tc, err := configs.ServerTLSConfig{CertFile: cert, KeyFile: key}.Load()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	svc, err := wallet.NewService(memdb.NewWalletStore(), configs.DefaultGifts(), configs.WalletConfig{DiamondPercent: 100}, wallet.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: log, ClientTokens: []string{clientTok}, OperatorTokens: []string{operatorTok}, TLS: tc})
	v1.RegisterWalletServiceServer(srv, grpcapi.NewWalletServer(svc, log))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	walletTLS := configs.ClientTLSConfig{Enabled: true, CAFile: ca.CertFile}
	_, rc := startDev(t, func(c *configs.Config) {
		c.Wallet.Addr, c.Wallet.AuthToken, c.Wallet.TLS = lis.Addr().String(), token, walletTLS
		// --dev's wallet notices read the wallet in this process; it is remote here.
		c.Notice.WalletNoticeWorker.Enabled = false
	})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	ctx := ctxT(t)
	wtc, err := walletTLS.Load()
	if err != nil {
		t.Fatal(err)
	}
	wconn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(wtc)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wconn.Close() })
	wc := v1.NewWalletServiceClient(wconn)
	if _, err := wc.Credit(withToken(ctx, operatorTok), &v1.WalletCreditRequest{CommandId: "t1", AppCode: "a", UserId: "alice", AssetType: "COIN", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r1", UserId: "alice", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: "a", RoomId: "r1", UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	_, err = rc.SendGift(ctx, &v1.SendGiftRequest{CommandId: "g1", AppCode: "a", RoomId: "r1", UserId: "alice", ToUserId: "bob", GiftId: "rose", GiftCount: 1})
	if status.Code(err) != want {
		t.Fatalf("gift through a remote wallet with token %q: %v, want %s", token, err, want)
	}
	b, err := wc.GetBalances(withToken(ctx, clientTok), &v1.WalletGetBalancesRequest{AppCode: "a", UserId: "alice"})
	if err != nil || coin(b) != wantCoin {
		t.Fatalf("alice after the gift with token %q: %v %v, want %d COIN", token, b, err, wantCoin)
	}
}

// The process's logger holds back repeated identical errors.
func TestProcessLoggerThrottlesRepeatedErrors(t *testing.T) {
	var sb strings.Builder
	log := newLogger(configs.LogConfig{Level: "info", Format: "json", RepeatInterval: time.Hour}, &sb)
	for i := range 1000 {
		log.With("room_id", i).Warn("room load failed", "error", context.DeadlineExceeded)
	}
	if n := strings.Count(sb.String(), "\n"); n != 1 {
		t.Fatalf("%d lines for 1000 identical errors, want 1", n)
	}
}

// rawBytes sends and receives bodies as they are.
type rawBytes struct{}

func (rawBytes) Name() string { return "proto" }
func (rawBytes) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawBytes) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}
