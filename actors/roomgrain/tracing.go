package roomgrain

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/internal/tracing"
	"github.com/hyapp/roomcell/room"
)

// Spans of a command: the client's (room.command: the ask, its retries
// and the cluster hop), the grain's (room.grain: the command in its
// room), the store call under it (store.append). The trace crosses the
// mailbox and the cluster in RoomCommand.traceparent, and reaches the
// command's outbox rows in their envelopes' (the grain span's), which a
// sender links its send to. With tracing off none of this runs.

func noEnd(error) {}

func commandAttrs(rc *v1.RoomCommand) trace.SpanStartOption {
	app, roomID := room.KeyOf(rc)
	typ := ""
	if req := room.Request(rc); req != nil {
		typ = string(req.ProtoReflect().Descriptor().Name())
	}
	return trace.WithAttributes(attribute.String("roomcell.app_code", app), attribute.String("roomcell.room_id", roomID),
		attribute.String("roomcell.command", typ))
}

// commandSpan starts the span of sending rc to its room and writes its
// trace context into rc for the grain.
func commandSpan(ctx context.Context, rc *v1.RoomCommand) (context.Context, func(error)) {
	if !tracing.On() {
		return ctx, noEnd
	}
	ctx, span := tracing.Tracer().Start(ctx, "room.command", commandAttrs(rc), trace.WithSpanKind(trace.SpanKindClient))
	rc.Traceparent = tracing.Traceparent(ctx)
	return ctx, func(err error) { tracing.End(span, err) }
}

// grainSpan starts the grain's span of rc, a child of the sender's, and
// returns its traceparent for the command's store calls and rows ("" and
// nothing started when rc is not traced).
func grainSpan(rc *v1.RoomCommand) (string, func(error)) {
	if rc.GetTraceparent() == "" || !tracing.On() {
		return "", noEnd
	}
	ctx, span := tracing.Tracer().Start(tracing.Remote(context.Background(), rc.GetTraceparent()), "room.grain",
		commandAttrs(rc), trace.WithSpanKind(trace.SpanKindServer))
	return tracing.Traceparent(ctx), func(err error) { tracing.End(span, err) }
}

// storeSpan starts a span of a store call under the command's trace, on
// the call's own ctx (its deadline); nothing for an untraced command.
func storeSpan(ctx context.Context, traceparent, name string) (context.Context, func(error)) {
	if traceparent == "" {
		return ctx, noEnd
	}
	_, span := tracing.Tracer().Start(tracing.Remote(ctx, traceparent), name, trace.WithSpanKind(trace.SpanKindClient))
	return trace.ContextWithSpan(ctx, span), func(err error) { tracing.End(span, err) }
}
