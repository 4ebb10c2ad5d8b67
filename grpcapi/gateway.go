package grpcapi

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// Gateway serves the client API (RoomService and WalletService's client
// RPCs) as HTTP/JSON: the handlers
// grpc-gateway generated from the proto (routes in
// api/roomcellv1/gateway.yaml) call the node's own gRPC server over an
// in-process pipe, so every request passes the same interceptors (bearer
// token, request id, checks, recovery) and gets the same errors, as the
// gRPC status in JSON with its HTTP code (NOT_FOUND 404, INVALID_ARGUMENT
// 400, UNAUTHENTICATED 401, UNAVAILABLE 503, ...). Field names are the
// proto's (snake_case), as the seeds' clients send them; an event's
// payload is a JSON object (eventObjects), not a string. Before any of
// that, the door (gatewaydoor.go) checks the token and caps the body.
type Gateway struct {
	http *http.Server
	lis  net.Listener
	pipe *bufconn.Listener
	conn *grpc.ClientConn
}

// GatewayOptions configure StartGateway.
type GatewayOptions struct {
	Addr string
	// Listener, when set, is served instead of listening on Addr (the
	// process passes one under its connection caps).
	Listener net.Listener
	// TLS: the gRPC server serves TLS (grpc.tls); the pipe then carries
	// TLS too, unverified (it never leaves the process).
	TLS bool
	// ClientTokens and OperatorTokens are the gRPC server's (Options): the
	// gateway checks them itself before it reads a body.
	ClientTokens, OperatorTokens []string
	// MaxBodyBytes bounds a request's body (413 beyond); 0 =
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// The HTTP server's timeouts (0: 5s, 10s, 30s, 60s): headers; the
	// whole request with its body; the reply (a WatchRoom stream is
	// exempt); an idle keep-alive connection.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	Logger                                                    *slog.Logger
	// Tracing, when set, makes a span of every request, continuing the
	// caller's W3C traceparent header, and passes the trace to the gRPC
	// server; nil = no tracing.
	Tracing trace.TracerProvider
}

// gatewayHeader passes the headers the gRPC API reads: Authorization (as
// grpc-gateway always does), the request id and the end user's id (the
// reads' rate limits); the rest get grpc-gateway's prefix.
func gatewayHeader(key string) (string, bool) {
	switch textproto.CanonicalMIMEHeaderKey(key) {
	case textproto.CanonicalMIMEHeaderKey(RequestIDHeader):
		return RequestIDHeader, true
	case textproto.CanonicalMIMEHeaderKey(UserIDHeader):
		return UserIDHeader, true
	}
	return runtime.DefaultHeaderMatcher(key)
}

// newGatewayMux routes the HTTP/JSON requests of every client service
// (the rules of api/roomcellv1/gateway.yaml) to conn. A service whose role
// this node does not run answers Unimplemented (501), as over gRPC.
func newGatewayMux(conn *grpc.ClientConn, opts ...runtime.ServeMuxOption) (*runtime.ServeMux, error) {
	mux := runtime.NewServeMux(append([]runtime.ServeMuxOption{
		runtime.WithIncomingHeaderMatcher(gatewayHeader),
		runtime.WithOutgoingHeaderMatcher(func(key string) (string, bool) {
			if key == RequestIDHeader {
				return "X-Request-Id", true
			}
			return "", false
		}),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, eventObjects{&runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{},
		}}),
	}, opts...)...)
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		roomcellv1.RegisterRoomServiceHandler,
		roomcellv1.RegisterWalletServiceHandler,
	} {
		if err := register(context.Background(), mux, conn); err != nil {
			return nil, err
		}
	}
	return mux, nil
}

// StartGateway serves srv's RoomService on o.Addr as HTTP/JSON.
func StartGateway(srv *grpc.Server, o GatewayOptions) (*Gateway, error) {
	lis := o.Listener
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", o.Addr); err != nil {
			return nil, err
		}
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	routes, err := loadGatewayRoutes(roomcellv1.GatewayRules)
	if err != nil {
		lis.Close()
		return nil, err
	}
	d := &door{routes: routes, maxBody: o.MaxBodyBytes, log: log}
	if d.maxBody <= 0 {
		d.maxBody = DefaultMaxBodyBytes
	}
	if len(o.ClientTokens)+len(o.OperatorTokens) > 0 {
		d.auth = newTokenAuth(o.ClientTokens, o.OperatorTokens)
	}
	g := &Gateway{lis: lis, pipe: bufconn.Listen(1 << 20)}
	go func() { _ = srv.Serve(g.pipe) }()
	creds := insecure.NewCredentials()
	if o.TLS {
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // an in-process pipe
	}
	dial := []grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return g.pipe.DialContext(ctx) }),
		grpc.WithTransportCredentials(creds),
	}
	if o.Tracing != nil {
		dial = append(dial, grpcClientTracing(o.Tracing))
	}
	g.conn, err = grpc.NewClient("passthrough:///gateway", dial...)
	if err != nil {
		lis.Close()
		return nil, err
	}
	mux, err := newGatewayMux(g.conn,
		runtime.WithMiddlewares(d.middleware),
		runtime.WithErrorHandler(d.errorHandler),
		runtime.WithRoutingErrorHandler(d.routingError),
		// A POST to a GET route is a wrong method, not a form to parse.
		runtime.WithDisablePathLengthFallback(),
		runtime.WithDisableHTTPMethodOverride(),
	)
	d.mux = mux
	if err != nil {
		g.conn.Close()
		lis.Close()
		return nil, err
	}
	or := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	handler := d.handler(mux)
	if o.Tracing != nil {
		handler = httpServerTracing(o.Tracing, handler)
	}
	g.http = &http.Server{Handler: handler, MaxHeaderBytes: maxHeaderBytes,
		ReadHeaderTimeout: or(o.ReadHeaderTimeout, 5*time.Second), ReadTimeout: or(o.ReadTimeout, 10*time.Second),
		WriteTimeout: or(o.WriteTimeout, 30*time.Second), IdleTimeout: or(o.IdleTimeout, time.Minute),
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		if err := g.http.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("gateway serve", "error", err)
		}
	}()
	return g, nil
}

// Addr is the listener's address.
func (g *Gateway) Addr() string { return g.lis.Addr().String() }

// Shutdown stops taking requests and waits for those under way until
// ctx ends (watch streams end with the gRPC server's drain).
func (g *Gateway) Shutdown(ctx context.Context) error {
	err := g.http.Shutdown(ctx)
	g.conn.Close()
	return err
}
