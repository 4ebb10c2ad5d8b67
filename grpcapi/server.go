package grpcapi

import (
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// DefaultMaxMsgBytes bounds a request or reply; room commands are tiny.
const DefaultMaxMsgBytes = 4 << 20

// Options configure NewServer.
type Options struct {
	Logger *slog.Logger // nil = slog.Default()
	// AuthToken, when set, is required as "authorization: Bearer <token>"
	// on every RPC but health and reflection.
	AuthToken string
	// MaxMsgBytes bounds received and sent messages; 0 = DefaultMaxMsgBytes.
	MaxMsgBytes int
	// Extra server options (TLS, keepalive, stats handlers), applied last.
	Extra []grpc.ServerOption
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
	// Order matters: the request id comes first so every later step logs
	// it; recovery sits below the access log so a panic is logged as the
	// Internal it answered.
	unary := []grpc.UnaryServerInterceptor{requestIDUnary, accessLogUnary(log), recoveryUnary(log)}
	stream := []grpc.StreamServerInterceptor{requestIDStream, accessLogStream(log), recoveryStream(log)}
	if o.AuthToken != "" {
		a := newBearerAuth(o.AuthToken)
		unary = append(unary, a.unary)
		stream = append(stream, a.stream)
	}
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(maxMsg),
		grpc.MaxSendMsgSize(maxMsg),
		grpc.ForceServerCodecV2(serverCodec{base: encoding.GetCodecV2(grpcproto.Name)}),
	}
	srv := grpc.NewServer(append(opts, o.Extra...)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return srv, hs
}
