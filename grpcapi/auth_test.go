package grpcapi

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

const (
	clientTok   = "client-token-0123456789"
	operatorTok = "operator-token-0123456789"
)

// registerStubs registers every roomcell.v1 service with the generated
// Unimplemented servers: a call that passes the interceptors answers
// Unimplemented, so the code tells exactly where a call stopped.
func registerStubs(srv *grpc.Server) {
	roomcellv1.RegisterRoomServiceServer(srv, roomcellv1.UnimplementedRoomServiceServer{})
	roomcellv1.RegisterWalletServiceServer(srv, roomcellv1.UnimplementedWalletServiceServer{})
	roomcellv1.RegisterOutboxAdminServer(srv, roomcellv1.UnimplementedOutboxAdminServer{})
	roomcellv1.RegisterNoticeAdminServer(srv, roomcellv1.UnimplementedNoticeAdminServer{})
	roomcellv1.RegisterClusterAdminServer(srv, roomcellv1.UnimplementedClusterAdminServer{})
	roomcellv1.RegisterPurgeAdminServer(srv, roomcellv1.UnimplementedPurgeAdminServer{})
	roomcellv1.RegisterImAdminServer(srv, roomcellv1.UnimplementedImAdminServer{})
}

// startTCP serves o with every service stubbed on a real loopback port.
func startTCP(t *testing.T, o Options, dial ...grpc.DialOption) (*grpc.Server, *grpc.ClientConn) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = discardLogger()
	}
	srv, _ := NewServer(o)
	registerStubs(srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	if len(dial) == 0 {
		dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(lis.Addr().String(), dial...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return srv, conn
}

// v1Methods lists every method of every service in the roomcell.v1
// proto package, whether or not a test registered it.
func v1Methods(t *testing.T) []protoreflect.MethodDescriptor {
	t.Helper()
	out := protoMethods()
	if len(out) < 20 {
		t.Fatalf("found %d roomcell.v1 methods; the proto registry walk is broken", len(out))
	}
	return out
}

func fullName(m protoreflect.MethodDescriptor) string {
	return "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
}

// A method added to a proto without an access option, or registered on
// the server without one, fails here rather than answering
// PermissionDenied in production.
func TestEveryMethodHasAClass(t *testing.T) {
	for _, m := range v1Methods(t) {
		if MethodClass(fullName(m)) == ClassNone {
			t.Errorf("%s has no (roomcell.v1.access) option", fullName(m))
		}
	}
	srv, _ := NewServer(Options{Logger: discardLogger()})
	registerStubs(srv)
	if un := UnclassifiedMethods(srv); len(un) > 0 {
		t.Fatalf("registered methods without a class: %v", un)
	}
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "roomcell.v1.Unlisted", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Do"}},
	}, struct{}{})
	if un := UnclassifiedMethods(srv); len(un) != 1 || un[0] != "/roomcell.v1.Unlisted/Do" {
		t.Fatalf("an unlisted service was not reported: %v", un)
	}
}

func newMsg(t *testing.T, name protoreflect.FullName) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}

func bearerCtx(t *testing.T, token string) context.Context {
	if token == "" {
		return testCtx(t)
	}
	return metadata.AppendToOutgoingContext(testCtx(t), "authorization", "Bearer "+token)
}

func TestAuthMatrixEveryRPC(t *testing.T) {
	_, conn := startTCP(t, Options{ClientTokens: []string{clientTok, "client-token-next"}, OperatorTokens: []string{operatorTok}})
	callers := []struct {
		name, token string
	}{{"none", ""}, {"client", clientTok}, {"operator", operatorTok}, {"wrong", "not-a-token"}}
	operatorOnly := 0
	for _, m := range v1Methods(t) {
		class := MethodClass(fullName(m))
		if class == ClassOperator {
			operatorOnly++
		}
		for _, c := range callers {
			want := codes.Unimplemented // passed auth, reached the stub
			switch {
			case c.name == "none" || c.name == "wrong":
				want = codes.Unauthenticated
			case c.name == "client" && class == ClassOperator:
				want = codes.PermissionDenied
			}
			err := conn.Invoke(bearerCtx(t, c.token), fullName(m), newMsg(t, m.Input().FullName()), newMsg(t, m.Output().FullName()))
			if status.Code(err) != want {
				t.Errorf("%s with %s token: %v, want %s", fullName(m), c.name, err, want)
			}
			if err != nil && (strings.Contains(err.Error(), clientTok) || strings.Contains(err.Error(), operatorTok)) {
				t.Errorf("%s: error leaks a token: %v", fullName(m), err)
			}
		}
	}
	// The guarantee is a split: some methods must be operator-only.
	for _, m := range []string{
		roomcellv1.WalletService_Credit_FullMethodName, roomcellv1.WalletService_DebitGift_FullMethodName,
		roomcellv1.WalletService_HoldGift_FullMethodName, roomcellv1.WalletService_ConfirmGift_FullMethodName,
		roomcellv1.WalletService_RefundGift_FullMethodName, roomcellv1.WalletService_ListOpenGiftHolds_FullMethodName,
		roomcellv1.OutboxAdmin_RetryOutbox_FullMethodName, roomcellv1.NoticeAdmin_RequeueNotice_FullMethodName,
		roomcellv1.ClusterAdmin_Members_FullMethodName, roomcellv1.ImAdmin_ReconcileImBans_FullMethodName,
	} {
		if MethodClass(m) != ClassOperator {
			t.Errorf("%s is %s, want operator", m, MethodClass(m))
		}
	}
	// An admin service repairs or inspects the system: all of it is an
	// operator's, whatever its proto says of one method.
	for _, m := range v1Methods(t) {
		if strings.HasSuffix(string(m.Parent().Name()), "Admin") && MethodClass(fullName(m)) != ClassOperator {
			t.Errorf("%s is %s, want operator (admin service)", fullName(m), MethodClass(fullName(m)))
		}
	}
	if operatorOnly < 8 {
		t.Fatalf("only %d operator methods", operatorOnly)
	}
	// A second client token works too (rotation).
	if _, err := roomcellv1.NewWalletServiceClient(conn).GetBalances(bearerCtx(t, "client-token-next"), &roomcellv1.WalletGetBalancesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("second client token: %v", err)
	}
}

// PurchaseVip is a client's call only when the user pays.
func TestFreeVipGrantNeedsOperator(t *testing.T) {
	_, conn := startTCP(t, Options{ClientTokens: []string{clientTok}, OperatorTokens: []string{operatorTok}})
	w := roomcellv1.NewWalletServiceClient(conn)
	for _, tc := range []struct {
		source, token string
		want          codes.Code
	}{
		{"", clientTok, codes.Unimplemented},
		{"vip_purchase", clientTok, codes.Unimplemented},
		{"admin_grant", clientTok, codes.PermissionDenied},
		{"activity_grant", clientTok, codes.PermissionDenied},
		{"made_up", clientTok, codes.PermissionDenied},
		{"admin_grant", operatorTok, codes.Unimplemented},
		{"admin_grant", "", codes.Unauthenticated},
	} {
		_, err := w.PurchaseVip(bearerCtx(t, tc.token), &roomcellv1.WalletPurchaseVipRequest{Source: tc.source})
		if status.Code(err) != tc.want {
			t.Errorf("source %q token %q: %v, want %s", tc.source, tc.token, err, tc.want)
		}
	}
}

// With only operator tokens configured, client methods are not open to
// anyone: configuring any token closes everything.
func TestOperatorTokensOnlyClosesClientMethods(t *testing.T) {
	_, conn := startTCP(t, Options{OperatorTokens: []string{operatorTok}})
	rc := roomcellv1.NewRoomServiceClient(conn)
	if _, err := rc.GetRoom(testCtx(t), &roomcellv1.GetRoomRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("GetRoom without token: %v", err)
	}
	if _, err := rc.GetRoom(bearerCtx(t, operatorTok), &roomcellv1.GetRoomRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetRoom with operator token: %v", err)
	}
}

func TestUnclassifiedMethodIsRefused(t *testing.T) {
	a := newTokenAuth([]string{clientTok}, []string{operatorTok})
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+operatorTok))
	_, err := gate{a}.unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/roomcell.v1.New/Thing"}, func(context.Context, any) (any, error) {
		t.Fatal("handler ran for an unclassified method")
		return nil, nil
	})
	assertCode(t, err, codes.PermissionDenied)
}
