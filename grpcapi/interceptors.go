package grpcapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	grpcrecovery "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/room"
)

// RequestIDHeader is the metadata key a caller may set to trace a request;
// the server echoes the id it used in the response header of that name.
const RequestIDHeader = "x-request-id"

// call is what the edge knows about one RPC, in one context value: the
// request id (set by the edge interceptor) and the class the caller's
// token opened (set by the gate, on a server with tokens).
type call struct {
	requestID string
	class     Class
	classSet  bool
}

type callKey struct{}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// RequestIDFrom returns the request id the interceptor put in ctx, or "".
func RequestIDFrom(ctx context.Context) string {
	if c := callOf(ctx); c != nil {
		return c.requestID
	}
	return ""
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

// requestIDHeader is the response header naming id; the key is already
// lower case, so it skips metadata.Pairs' lowering and copying.
func requestIDHeader(id string) metadata.MD { return metadata.MD{RequestIDHeader: {id}} }

// edge is the outermost interceptor: it gives the call its request id
// (echoed in the response header) and writes the access log line.
type edge struct{ log *slog.Logger }

func (e edge) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c := &call{requestID: incomingRequestID(ctx)}
	ctx = context.WithValue(ctx, callKey{}, c)
	// SetHeader only fails once headers are sent, which cannot have
	// happened before the handler ran.
	_ = grpc.SetHeader(ctx, requestIDHeader(c.requestID))
	// The level is checked first: with debug off the access log costs
	// the call nothing (not even the clock).
	if !e.log.Enabled(ctx, slog.LevelDebug) {
		return handler(ctx, req)
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	logAccess(ctx, e.log, info.FullMethod, err, start)
	return resp, err
}

func (e edge) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c := &call{requestID: incomingRequestID(ss.Context())}
	_ = ss.SetHeader(requestIDHeader(c.requestID))
	ctx := context.WithValue(ss.Context(), callKey{}, c)
	start := time.Now()
	err := handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	logAccess(ctx, e.log, info.FullMethod, err, start)
	return err
}

// ctxStream is a ServerStream carrying a derived context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

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

// gate is the innermost interceptor: the token check by the method's
// class (auth.go; skipped on a server without tokens), then the bad-body
// check (codec.go) after it, so a caller without a token learns nothing,
// not even whether its body parsed.
type gate struct{ auth *tokenAuth }

func (d gate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if d.auth != nil {
		if need := RequestClass(info.FullMethod, req); need != ClassPublic {
			have := d.auth.callerClass(ctx)
			if err := refusal(need, have); err != nil {
				return nil, err
			}
			// The handler may narrow what a client sees (ListRooms'
			// unlisted rooms) by who asks.
			ctx = withCallerClass(ctx, have)
		}
	}
	if err := badBodyError(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Streams are checked by method alone: WatchRoom's class does not depend
// on its request.
func (d gate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if d.auth != nil {
		if err := d.auth.check(ss.Context(), MethodClass(info.FullMethod)); err != nil {
			return err
		}
	}
	return handler(srv, badBodyServerStream{ss})
}

// withCallerClass records the caller's class in the call's context value
// (a new one below a server without the edge interceptor).
func withCallerClass(ctx context.Context, have Class) context.Context {
	if c := callOf(ctx); c != nil {
		c.class, c.classSet = have, true
		return ctx
	}
	return context.WithValue(ctx, callKey{}, &call{class: have, classSet: true})
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
