package main

import (
	"context"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/hyapp/roomcell/internal/tracing"
)

// startTracing installs the tracer provider the tracing block (or the
// OTEL_EXPORTER_OTLP_* environment) asks for; off, nothing. exp, when
// set, takes the spans instead of OTLP (tests).
func (a *App) startTracing(ctx context.Context, exp sdktrace.SpanExporter) error {
	tp, err := tracing.NewProvider(ctx, a.cfg.Tracing, otelResource(), exp)
	if err != nil || tp == nil {
		return err
	}
	a.traces = tp
	a.untrace = tracing.Install(tp)
	a.log.Info("tracing on", "otlp_endpoint", a.cfg.Tracing.OTLPEndpoint, "sample_ratio", a.cfg.Tracing.Ratio())
	return nil
}

// stopTracing exports the spans still buffered and uninstalls the
// provider: last, so the shutdown's own spans are not lost.
func (a *App) stopTracing() {
	if a.traces == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := tracing.Shutdown(ctx, a.traces); err != nil {
		a.log.Warn("tracing shutdown", "error", err)
	}
	a.untrace()
}
