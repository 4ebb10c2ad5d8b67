package roomim

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hyapp/roomcell/internal/tracing"
)

// sendSpan starts the span of one group message of batch, linked to the
// commands that wrote its events (tracing.Linked); none for a send of
// untraced events or with tracing off.
func sendSpan(gid string, batch []*item) trace.Span {
	if !tracing.On() {
		return trace.SpanFromContext(context.Background())
	}
	tps := make([]string, len(batch))
	for i, it := range batch {
		tps[i] = it.traceparent
	}
	_, span := tracing.Linked(context.Background(), "im.send_group_msg", tps, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("roomcell.im_group_id", gid), attribute.Int("roomcell.events", len(batch)),
			attribute.String("roomcell.first_event_id", batch[0].env.EventID)))
	return span
}
