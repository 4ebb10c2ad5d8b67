package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hyapp/roomcell/configs"
)

const tp1 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// Off, nothing is recorded and nothing is carried: Traceparent is "",
// Child and Linked start no span and hand ctx back as it was.
func TestOffStartsNothing(t *testing.T) {
	if On() {
		t.Fatal("tracing on by default")
	}
	ctx := context.Background()
	if c, span := Child(ctx, "x"); c != ctx || span.IsRecording() {
		t.Fatal("Child started a span with tracing off")
	}
	if c, span := Linked(ctx, "x", []string{tp1}); c != ctx || span.IsRecording() {
		t.Fatal("Linked started a span with tracing off")
	}
	if tp := Traceparent(Remote(ctx, tp1)); tp != tp1 {
		// A caller's context is passed on even when off: it names the
		// caller's span, not one of ours.
		t.Fatalf("remote traceparent %q, want %q", tp, tp1)
	}
}

// On: a traceparent round-trips; Child starts a span only under a
// recording one; Linked is the first traced row's child, linked to each
// traced row once, and starts nothing for untraced rows.
func TestLinkedAndChild(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp, err := NewProvider(t.Context(), configs.TracingConfig{}, nil, exp)
	if err != nil || tp == nil {
		t.Fatalf("provider %v %v", tp, err)
	}
	defer Install(tp)()
	if _, span := Child(context.Background(), "orphan"); span.IsRecording() {
		t.Fatal("Child started a trace of its own")
	}
	if _, span := Linked(context.Background(), "untraced", []string{"", "garbage"}); span.IsRecording() {
		t.Fatal("Linked started a span for untraced rows")
	}
	const tp2 = "00-a3ce929d0e0e47364bf92f3577b34da6-b7ad6b7169203331-01"
	ctx, send := Linked(context.Background(), "send", []string{"", tp1, tp2, tp1})
	_, call := Child(ctx, "call")
	End(call, nil)
	End(send, context.Canceled)
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	c, s := spans[0], spans[1]
	if c.Parent.SpanID() != s.SpanContext.SpanID() {
		t.Fatal("Child is not the child of the span in ctx")
	}
	if s.Parent.SpanID().String() != "00f067aa0ba902b7" || s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("Linked's parent %v, want the first traced row's", s.Parent)
	}
	if len(s.Links) != 2 || s.Links[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" || s.Links[1].SpanContext.SpanID().String() != "b7ad6b7169203331" {
		t.Fatalf("links %v, want each traced row once", s.Links)
	}
	if s.Status.Code.String() != "Error" {
		t.Fatalf("status %v, want the error", s.Status)
	}
	if got := SpanContext(Traceparent(trace.ContextWithSpanContext(context.Background(), s.SpanContext))); !got.Equal(s.SpanContext.WithRemote(true)) {
		t.Fatalf("traceparent round trip %v, want %v", got, s.SpanContext)
	}
}

// A ratio of 0 keeps no new trace but follows a caller that sampled.
func TestRatioFollowsTheCaller(t *testing.T) {
	zero := 0.0
	tp, err := NewProvider(t.Context(), configs.TracingConfig{SampleRatio: &zero}, nil, tracetest.NewInMemoryExporter())
	if err != nil {
		t.Fatal(err)
	}
	tr := tp.Tracer("t")
	if _, s := tr.Start(context.Background(), "new"); s.IsRecording() {
		t.Fatal("ratio 0 sampled a new trace")
	}
	if _, s := tr.Start(Remote(context.Background(), tp1), "continued"); !s.IsRecording() {
		t.Fatal("ratio 0 dropped a trace its caller sampled")
	}
}

// Without an endpoint in the config or the environment there is no
// provider: tracing stays off.
func TestNoEndpointIsOff(t *testing.T) {
	for _, k := range EnvEndpoints {
		t.Setenv(k, "")
	}
	tp, err := NewProvider(t.Context(), configs.TracingConfig{}, nil, nil)
	if err != nil || tp != nil {
		t.Fatalf("provider %v %v, want none", tp, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tp, err = NewProvider(t.Context(), configs.TracingConfig{}, nil, nil)
	if err != nil || tp == nil {
		t.Fatalf("provider %v %v, want one from the environment", tp, err)
	}
	_ = Shutdown(t.Context(), tp)
}
