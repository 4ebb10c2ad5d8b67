// Package tracing is the process's OpenTelemetry traces: the provider
// (off unless an OTLP endpoint is configured), the tracer every package
// starts its spans from, and the W3C traceparent a room command and its
// outbox rows carry, so a row's send, in whatever process and however
// late, is linked to the command that wrote it.
//
// Off, Tracer is OpenTelemetry's no-op tracer and Traceparent is "":
// no span is recorded, no trace context is read or written, and the
// gRPC and HTTP servers get no tracing handler at all (Handlers).
//
// The tracer is this package's, not OpenTelemetry's global: the global
// delegates only to the first provider ever set, so a process that
// starts twice (tests) would keep tracing into the first.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hyapp/roomcell/configs"
)

// ScopeName is the instrumentation scope of roomcell's own spans.
const ScopeName = "github.com/hyapp/roomcell"

type state struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
	on       bool
}

var current atomic.Pointer[state]

func init() { Install(nil) }

// Install makes tp the provider of Tracer and Provider; nil turns tracing
// off. It returns a function that puts the previous one back.
func Install(tp trace.TracerProvider) (restore func()) {
	s := &state{provider: tp, on: tp != nil}
	if tp == nil {
		s.provider = noop.NewTracerProvider()
	}
	s.tracer = s.provider.Tracer(ScopeName)
	prev := current.Swap(s)
	return func() { current.Store(prev) }
}

// Tracer is the tracer of roomcell's spans (a no-op one when off).
func Tracer() trace.Tracer { return current.Load().tracer }

// Provider is the installed provider (a no-op one when off).
func Provider() trace.TracerProvider { return current.Load().provider }

// On reports whether a provider is installed.
func On() bool { return current.Load().on }

// Propagator reads and writes W3C trace context (traceparent,
// tracestate) on gRPC metadata and HTTP headers.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Traceparent is the W3C traceparent of the span in ctx, "" when ctx has
// no sampled span: an unsampled trace has nothing to link to.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// SpanContext parses a traceparent; the zero (invalid) SpanContext for ""
// or a malformed one.
func SpanContext(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// Remote returns ctx with the traceparent's span as the remote parent of
// the spans started from it; ctx unchanged for "" or a malformed one.
func Remote(ctx context.Context, traceparent string) context.Context {
	if sc := SpanContext(traceparent); sc.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// Links are links to the spans the traceparents name, skipping "" and
// malformed ones, each once.
func Links(traceparents ...string) []trace.Link {
	var out []trace.Link
	seen := map[string]bool{}
	for _, tp := range traceparents {
		if seen[tp] {
			continue
		}
		seen[tp] = true
		if sc := SpanContext(tp); sc.IsValid() {
			out = append(out, trace.Link{SpanContext: sc})
		}
	}
	return out
}

// EnvEndpoints are the standard variables that name an OTLP endpoint;
// either one turns tracing on when tracing.otlp_endpoint is empty.
var EnvEndpoints = []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}

// NewProvider builds the provider cfg asks for, nil when tracing is off
// (no endpoint in cfg nor the environment, and no exporter given). exp,
// when set, receives every span as it ends (tests:
// tracetest.NewInMemoryExporter); otherwise spans are batched to the OTLP
// endpoint. New traces are kept at cfg's ratio; a call whose caller
// sampled it is always kept, one whose caller did not never is.
func NewProvider(ctx context.Context, cfg configs.TracingConfig, res *resource.Resource, exp sdktrace.SpanExporter) (*sdktrace.TracerProvider, error) {
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Ratio()))),
	}
	if exp != nil {
		return sdktrace.NewTracerProvider(append(opts, sdktrace.WithSyncer(exp))...), nil
	}
	var eopts []otlptracegrpc.Option
	switch {
	case cfg.OTLPEndpoint != "":
		eopts = append(eopts, otlptracegrpc.WithEndpointURL(cfg.OTLPEndpoint))
	case envEndpoint() == "":
		return nil, nil
	}
	// The exporter connects lazily: a collector that is down costs
	// dropped spans, never a failed start or a slow command.
	otlp, err := otlptracegrpc.New(ctx, eopts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	return sdktrace.NewTracerProvider(append(opts, sdktrace.WithBatcher(otlp))...), nil
}

func envEndpoint() string {
	for _, k := range EnvEndpoints {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}

// Shutdown flushes and stops tp (nil: nothing to do).
func Shutdown(ctx context.Context, tp *sdktrace.TracerProvider) error {
	if tp == nil {
		return nil
	}
	return errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx))
}

// Child starts a span under ctx's span. Without a recording span in ctx
// it starts none and returns ctx as it is: an outside call (IM, TRTC, the
// message queue) is traced as part of a traced command's work, never as a
// trace of its own.
func Child(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return Tracer().Start(ctx, name, opts...)
}

// End ends span, with err as its error status when not nil.
func End(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Linked starts the span of sending the rows of commands whose
// traceparents are given: linked to each of them, so a row sent late, by
// the relay or by another process, is found from its command's trace, and
// a child of the first, so it is kept whenever that command's trace is
// (a sampler follows the parent, not links) and shows in it. With tracing
// off or no traced command among them it starts none and returns ctx.
func Linked(ctx context.Context, name string, traceparents []string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !On() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	links := Links(traceparents...)
	if len(links) == 0 {
		return ctx, trace.SpanFromContext(context.Background())
	}
	opts = append(opts, trace.WithLinks(links...))
	return Tracer().Start(trace.ContextWithRemoteSpanContext(ctx, links[0].SpanContext), name, opts...)
}
