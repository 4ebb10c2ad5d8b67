package grpcapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	grpcrecovery "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/hyapp/roomcell/room"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// RequestIDHeader is the metadata key a caller may set to trace a request;
// the server echoes the id it used in the response header of that name.
const RequestIDHeader = "x-request-id"

type requestIDKey struct{}

// RequestIDFrom returns the request id the interceptor put in ctx, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// NewRequestID returns a random id that passes room.CheckID.
func NewRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "req-" + hex.EncodeToString(b[:])
}

// requestIDFor is the request id a command carries: the caller's own,
// else the interceptor's, else a fresh one (a server built without the
// interceptors still traces every command).
func requestIDFor(ctx context.Context, own string) string {
	if own != "" {
		return own
	}
	if id := RequestIDFrom(ctx); id != "" {
		return id
	}
	return NewRequestID()
}

// incomingRequestID takes the caller's x-request-id if it is a valid id.
// An unusable one is replaced rather than refused: it is only for tracing
// and must not fail a command.
func incomingRequestID(ctx context.Context) string {
	// The one key, not a copy of all the metadata.
	if v := metadata.ValueFromIncomingContext(ctx, RequestIDHeader); len(v) > 0 && room.CheckID(RequestIDHeader, v[0]) == nil {
		return v[0]
	}
	return NewRequestID()
}

func requestIDUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	id := incomingRequestID(ctx)
	ctx = context.WithValue(ctx, requestIDKey{}, id)
	// SetHeader only fails once headers are sent, which cannot have
	// happened before the handler ran.
	_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, id))
	return handler(ctx, req)
}

func requestIDStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	id := incomingRequestID(ss.Context())
	_ = ss.SetHeader(metadata.Pairs(RequestIDHeader, id))
	return handler(srv, &ctxStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), requestIDKey{}, id)})
}

// ctxStream is a ServerStream carrying a derived context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

func accessLogUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		logAccess(ctx, log, info.FullMethod, err, start)
		return resp, err
	}
}

func accessLogStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		logAccess(ss.Context(), log, info.FullMethod, err, start)
		return err
	}
}

func logAccess(ctx context.Context, log *slog.Logger, method string, err error, start time.Time) {
	// Checked first: the arguments (boxed into []any) were built for every
	// RPC even with debug off.
	if !log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	log.DebugContext(ctx, "rpc",
		"method", method,
		"code", status.Code(err).String(),
		"duration", time.Since(start),
		"request_id", RequestIDFrom(ctx))
}

// recovery turns a panic below it into Internal (go-grpc-middleware's
// recovery, unary and stream): one broken request must not take the
// process and every room on it down. The panic is logged with its stack
// and the request id the answer names.
func recovery(log *slog.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	handler := grpcrecovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		method, _ := grpc.Method(ctx)
		return panicStatus(ctx, log, method, p)
	})
	return grpcrecovery.UnaryServerInterceptor(handler), grpcrecovery.StreamServerInterceptor(handler)
}

func panicStatus(ctx context.Context, log *slog.Logger, method string, r any) error {
	id := RequestIDFrom(ctx)
	log.ErrorContext(ctx, "panic in rpc handler",
		"method", method, "request_id", id,
		"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	return internalStatus(id)
}
