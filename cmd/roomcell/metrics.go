package main

import (
	"runtime"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/hyapp/roomcell/internal/buildinfo"
)

// serviceName is the OTel service.name of every process (the
// target_info series of /metrics and the traces' resource).
const serviceName = "roomcell"

// otelResource names the process to OpenTelemetry.
func otelResource() *resource.Resource {
	return resource.NewSchemaless(
		attribute.String("service.name", serviceName),
		attribute.String("service.version", buildinfo.Version),
	)
}

// metricsRegistry is the process's Prometheus registry. It keeps what was
// registered, so the families can be read from their descriptions
// (Describe) before any has a value: a labelled family shows in Gather
// only once a series exists.
type metricsRegistry struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

func newMetricsRegistry() *metricsRegistry {
	r := &metricsRegistry{Registry: prometheus.NewRegistry()}
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		// The Prometheus convention for what a target runs: value 1, the
		// facts as labels.
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "roomcell_build_info",
			Help:        "1; the labels say which roomcell build this process runs.",
			ConstLabels: prometheus.Labels{"version": buildinfo.Version, "goversion": runtime.Version()},
		}, func() float64 { return 1 }))
	return r
}

func (r *metricsRegistry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.collectors = append(r.collectors, c)
	r.mu.Unlock()
	return nil
}

func (r *metricsRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *metricsRegistry) Unregister(c prometheus.Collector) bool {
	if !r.Registry.Unregister(c) {
		return false
	}
	r.mu.Lock()
	if i := slices.Index(r.collectors, c); i >= 0 {
		r.collectors = slices.Delete(r.collectors, i, i+1)
	}
	r.mu.Unlock()
	return true
}

// Describe sends the descriptions of everything registered.
func (r *metricsRegistry) Describe(ch chan<- *prometheus.Desc) {
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	for _, c := range cs {
		c.Describe(ch)
	}
}
