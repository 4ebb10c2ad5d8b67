package configs

import (
	"net/url"
)

// TracingConfig is the tracing block: OpenTelemetry traces, exported over
// OTLP/gRPC. Off unless an endpoint is set here or in the standard
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// environment variable; off, no span is made and no trace context is
// read.
type TracingConfig struct {
	// OTLPEndpoint is the collector's OTLP/gRPC URL: http://host:4317
	// (plain) or https://host:4317 (TLS). "" = the OTEL_EXPORTER_OTLP_*
	// environment, else off.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// SampleRatio is the share of new traces kept, 0..1 (default 1). A
	// call that arrives with a W3C traceparent follows its caller's
	// decision whatever the ratio.
	SampleRatio *float64 `yaml:"sample_ratio"`
}

// Ratio is SampleRatio with its default.
func (c TracingConfig) Ratio() float64 {
	if c.SampleRatio == nil {
		return 1
	}
	return *c.SampleRatio
}

func (c TracingConfig) validate() error {
	if r := c.Ratio(); !(r >= 0 && r <= 1) {
		return errorf("tracing.sample_ratio", "%v is not between 0 and 1", r)
	}
	if c.OTLPEndpoint == "" {
		return nil
	}
	u, err := url.Parse(c.OTLPEndpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errorf("tracing.otlp_endpoint", "%q is not an http(s)://host:port URL", c.OTLPEndpoint)
	}
	return nil
}
