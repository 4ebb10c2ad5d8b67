package grpcapi

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/hyapp/roomcell/internal/tracing"
)

// The tracing handlers take the caller's W3C trace context and make the
// RPC's span. Their metrics go nowhere: the RPC metrics are the
// Prometheus provider's (NewMetrics), and a second set would be series
// without a panel.

func grpcServerTracing(tp trace.TracerProvider) grpc.ServerOption {
	return grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(tracing.Propagator()), otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider())))
}

// grpcClientTracing carries the gateway's trace context over its pipe to
// the gRPC server.
func grpcClientTracing(tp trace.TracerProvider) grpc.DialOption {
	return grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(tracing.Propagator()), otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider())))
}

func httpServerTracing(tp trace.TracerProvider, h http.Handler) http.Handler {
	// Named by method only: a path may be anything a client sent.
	return otelhttp.NewHandler(h, "gateway", otelhttp.WithTracerProvider(tp),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "gateway " + r.Method }),
		otelhttp.WithPropagators(tracing.Propagator()), otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))
}
