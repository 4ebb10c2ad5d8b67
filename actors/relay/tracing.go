package relay

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hyapp/roomcell/internal/tracing"
	"github.com/hyapp/roomcell/persistence"
)

// publishSpan starts the span of publishing rows to the topic, linked to
// the commands that wrote them (tracing.Linked); none with tracing off or
// for untraced rows.
func publishSpan(ctx context.Context, topic string, rows ...persistence.OutboxRow) (context.Context, trace.Span) {
	if !tracing.On() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	tps := make([]string, len(rows))
	for i, r := range rows {
		tps[i] = r.Envelope.TraceParent
	}
	return tracing.Linked(ctx, "mq.publish", tps, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.destination.name", topic), attribute.Int("roomcell.events", len(rows))))
}
