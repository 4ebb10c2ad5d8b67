package grpcapi

import (
	"crypto/tls"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// DefaultMaxMsgBytes bounds a request or reply; room commands are tiny.
const DefaultMaxMsgBytes = 4 << 20

// streamWorkers is how many goroutines serve requests and keep their
// stacks between them: about the concurrent requests a busy node has in
// flight (ghz -c 32..64 in docs/benchmarks.md).
const streamWorkers = 64

// Options configure NewServer.
type Options struct {
	Logger *slog.Logger // nil = slog.Default()
	// ClientTokens and OperatorTokens, when either is set, are required as
	// "authorization: Bearer <token>" by the class of each RPC (auth.go).
	// With neither, every RPC is open.
	ClientTokens, OperatorTokens []string
	// TLS, when set, is served on the listener (with ClientCAs and
	// RequireAndVerifyClientCert for mTLS).
	TLS *tls.Config
	// MaxMsgBytes bounds received and sent messages; 0 = DefaultMaxMsgBytes.
	MaxMsgBytes int
	// Extra server options (TLS, keepalive, stats handlers), applied last.
	Extra []grpc.ServerOption
}

// interceptors are the server's unary and stream interceptors, outermost
// first. Order matters: the request id comes first so every later step
// logs it; recovery sits below the access log so a panic is logged as the
// Internal it answered. Auth runs before the bad-body check so a caller
// without a token learns nothing, not even whether its body parsed.
func interceptors(o Options, log *slog.Logger) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	unary := []grpc.UnaryServerInterceptor{requestIDUnary, accessLogUnary(log), recoveryUnary(log)}
	stream := []grpc.StreamServerInterceptor{requestIDStream, accessLogStream(log), recoveryStream(log)}
	if len(o.ClientTokens)+len(o.OperatorTokens) > 0 {
		a := newTokenAuth(o.ClientTokens, o.OperatorTokens)
		unary = append(unary, a.unary)
		stream = append(stream, a.stream)
	}
	return append(unary, badBodyUnary), append(stream, badBodyStream)
}

// NewServer returns a gRPC server with the interceptors, health and
// reflection registered; the caller registers the services. The health
// server starts SERVING; set NOT_SERVING on it when draining.
func NewServer(o Options) (*grpc.Server, *health.Server) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	maxMsg := o.MaxMsgBytes
	if maxMsg <= 0 {
		maxMsg = DefaultMaxMsgBytes
	}
	unary, stream := interceptors(o, log)
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(maxMsg),
		grpc.MaxSendMsgSize(maxMsg),
		grpc.ForceServerCodecV2(badBodyCodec{base: serverCodec{base: encoding.GetCodecV2(grpcproto.Name)}}),
		// A goroutine per request grew its stack through the handler, the
		// room client and the cluster request on every call (runtime.newstack
		// ~5% of a command's CPU, issue 13); kept workers keep their stacks.
		// A request finding every worker busy still gets a goroutine of its
		// own, so this bounds nothing. (Experimental in grpc-go.)
		grpc.NumStreamWorkers(streamWorkers),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	srv := grpc.NewServer(append(opts, o.Extra...)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return srv, hs
}
