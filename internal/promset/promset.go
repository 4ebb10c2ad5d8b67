package promset

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Set registers instruments on one registerer for one component. Not
// safe for concurrent use: build a component's metrics in one goroutine.
type Set struct {
	reg   prometheus.Registerer
	owner string
	err   error
}

// New returns a Set registering on reg; owner prefixes its error
// ("relay: register metrics: …").
func New(reg prometheus.Registerer, owner string) *Set {
	return &Set{reg: reg, owner: owner}
}

// Err is the first registration error, nil when every instrument was
// registered.
func (s *Set) Err() error {
	if s.err == nil {
		return nil
	}
	return fmt.Errorf("%s: register metrics: %w", s.owner, s.err)
}

func add[C prometheus.Collector](s *Set, c C) C {
	if err := s.reg.Register(c); err != nil && s.err == nil {
		s.err = err
	}
	return c
}

// Counter makes and registers a counter.
func (s *Set) Counter(name, help string) prometheus.Counter {
	return add(s, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// Gauge makes and registers a gauge.
func (s *Set) Gauge(name, help string) prometheus.Gauge {
	return add(s, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// Histogram makes and registers a histogram.
func (s *Set) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return add(s, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

// CounterVec makes and registers a counter family with labels.
func (s *Set) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return add(s, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// GaugeVec makes and registers a gauge family with labels.
func (s *Set) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return add(s, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// HistogramVec makes and registers a histogram family with labels.
func (s *Set) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return add(s, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}
