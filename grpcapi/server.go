package grpcapi

import (
	"crypto/tls"
	"log/slog"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
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
	// Conn bounds each connection's life; the zero value leaves grpc-go's
	// defaults (no idle or age limit, no ping enforcement beyond 5m).
	Conn ConnOptions
	// Extra server options (stats handlers), applied last.
	Extra []grpc.ServerOption
	// Metrics, when set, counts every RPC by method and code and times it
	// (grpc_server_started_total, grpc_server_handled_total,
	// grpc_server_handling_seconds); see NewMetrics.
	Metrics *grpcprom.ServerMetrics
	// Tracing, when set, makes a span of every RPC, continuing the
	// caller's W3C trace context (tracing.go); nil = no tracing handler.
	Tracing trace.TracerProvider
}

// NewMetrics returns the per-method RPC metrics of go-grpc-middleware's
// Prometheus provider, with the handling-time histogram on, registered on
// reg. After the services are registered, InitializeMetrics(server) makes
// every method's series exist at zero, so a rate over a quiet method reads
// 0 rather than no data.
func NewMetrics(reg prometheus.Registerer) (*grpcprom.ServerMetrics, error) {
	m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
	))
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

// ConnOptions are the per-connection rules of a server: the caps on the
// number of connections are the listener's (connlimit).
type ConnOptions struct {
	// MaxIdle closes a connection without an RPC this long (GOAWAY).
	MaxIdle time.Duration
	// MaxAge asks a connection to close after this long; its RPCs get
	// MaxAgeGrace to end.
	MaxAge, MaxAgeGrace time.Duration
	// Handshake bounds TLS and the HTTP/2 preface of a new connection.
	Handshake time.Duration
	// PingAfter: ping a silent connection after this long, close it when
	// the answer takes over PingTimeout.
	PingAfter, PingTimeout time.Duration
	// MinPingInterval: a client pinging more often is closed
	// (too_many_pings); pings without an RPC in flight are allowed, so an
	// idle gateway may keep its connection checked.
	MinPingInterval time.Duration
	// MaxStreams caps the RPCs in flight on one connection (HTTP/2
	// SETTINGS_MAX_CONCURRENT_STREAMS); 0 = grpc-go's (unbounded).
	MaxStreams uint32
}

// connReadBuffer is a connection's read buffer: room requests are small,
// and grpc-go's 32 KiB a connection is most of what an idle one holds.
const connReadBuffer = 8 << 10

func (c ConnOptions) serverOptions() []grpc.ServerOption {
	// An idle connection gives its write buffer back to a shared pool
	// after each flush instead of holding 32 KiB of its own.
	out := []grpc.ServerOption{grpc.SharedWriteBuffer(true), grpc.ReadBufferSize(connReadBuffer)}
	if c.MaxStreams > 0 {
		out = append(out, grpc.MaxConcurrentStreams(c.MaxStreams))
	}
	if c.Handshake > 0 {
		out = append(out, grpc.ConnectionTimeout(c.Handshake))
	}
	if c != (ConnOptions{Handshake: c.Handshake, MaxStreams: c.MaxStreams}) {
		out = append(out,
			grpc.KeepaliveParams(keepalive.ServerParameters{
				MaxConnectionIdle: c.MaxIdle, MaxConnectionAge: c.MaxAge, MaxConnectionAgeGrace: c.MaxAgeGrace,
				Time: c.PingAfter, Timeout: c.PingTimeout,
			}),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: c.MinPingInterval, PermitWithoutStream: true}))
	}
	return out
}

// interceptors are the server's unary and stream interceptors, outermost
// first, one pass each: the edge (request id, access log), the RPC
// metrics and the panic recovery of go-grpc-middleware, the gate (auth,
// then the bad-body check). The request id comes first so every later
// step logs it; the metrics sit above recovery, so a panic counts as the
// Internal it answered, and above the gate, so refused calls count as
// Unauthenticated; recovery sits below the access log so a panic is
// logged as the Internal it answered. Auth runs before the bad-body check
// so a caller without a token learns nothing, not even whether its body
// parsed.
//
// The access log and auth stay ours rather than go-grpc-middleware's
// logging and auth: its logging interceptor builds its fields (peer
// address, formatted start time and deadline, a context value) on every
// call before the logger's level is asked, where ours costs a call nothing
// with debug off, and it names the fields grpc.*, not the method, code,
// duration and request_id our lines carry; its auth function sees the
// context only, not the request, which a free VIP grant's class depends on
// (RequestClass).
func interceptors(o Options, log *slog.Logger) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	e := edge{log: log}
	unary := []grpc.UnaryServerInterceptor{e.unary}
	stream := []grpc.StreamServerInterceptor{e.stream}
	if o.Metrics != nil {
		unary = append(unary, o.Metrics.UnaryServerInterceptor())
		stream = append(stream, o.Metrics.StreamServerInterceptor())
	}
	recoverUnary, recoverStream := recovery(log)
	unary = append(unary, recoverUnary)
	stream = append(stream, recoverStream)
	var d gate
	if len(o.ClientTokens)+len(o.OperatorTokens) > 0 {
		d.auth = newTokenAuth(o.ClientTokens, o.OperatorTokens)
	}
	return append(unary, d.unary), append(stream, d.stream)
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
		grpc.ForceServerCodecV2(eventsCodec{base: badBodyCodec{base: serverCodec{base: encoding.GetCodecV2(grpcproto.Name)}}}),
		// A goroutine per request grew its stack through the handler, the
		// room client and the cluster request on every call (runtime.newstack
		// ~5% of a command's CPU); kept workers keep their stacks.
		// A request finding every worker busy still gets a goroutine of its
		// own, so this bounds nothing. (Experimental in grpc-go.)
		grpc.NumStreamWorkers(streamWorkers),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	if o.Tracing != nil {
		opts = append(opts, grpcServerTracing(o.Tracing))
	}
	opts = append(opts, o.Conn.serverOptions()...)
	srv := grpc.NewServer(append(opts, o.Extra...)...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	return srv, hs
}
