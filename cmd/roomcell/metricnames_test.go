package main

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// seedOutboxMetrics are seed 000's outbox metric names, kept exactly as
// the seed writes them (a gauge ending in _total and two in milliseconds
// among them).
var seedOutboxMetrics = map[string]bool{
	"room_outbox_pending_total":         true,
	"room_outbox_publish_success_total": true,
	"room_outbox_publish_failure_total": true,
	"room_outbox_publish_latency_ms":    true,
	"room_outbox_oldest_pending_age_ms": true,
}

// Every family a process with every role exports follows Prometheus's
// naming: the roomcell_ prefix (grpc_server_* is go-grpc-middleware's
// standard set), base units (seconds, bytes: no _ms), _total on counters
// and only there; the process says what it runs (roomcell_build_info)
// and who it is to OTel (service_name="roomcell"). Seed 000's five
// outbox names are the exception, exactly those.
func TestMetricNamesFollowPrometheusConventions(t *testing.T) {
	app, _ := startDevWithMQ(t, withNotices)
	types := map[string]dto.MetricType{}
	mfs, err := app.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buildInfo, target *dto.MetricFamily
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType()
		switch mf.GetName() {
		case "roomcell_build_info":
			buildInfo = mf
		case "target_info":
			target = mf
		}
	}
	seedSeen := 0
	for _, n := range registeredFamilies(t, app.registry) {
		if strings.HasPrefix(n, "go_") || strings.HasPrefix(n, "process_") || strings.HasPrefix(n, "promhttp_") || n == "target_info" {
			continue
		}
		if seedOutboxMetrics[n] {
			seedSeen++
			continue
		}
		if !strings.HasPrefix(n, "roomcell_") && !strings.HasPrefix(n, "grpc_server_") {
			t.Errorf("%s: not under the roomcell_ prefix", n)
		}
		for _, unit := range []string{"_ms", "_milliseconds", "_mb", "_kb", "_minutes", "_hours"} {
			if strings.HasSuffix(n, unit) || strings.Contains(n, unit+"_") {
				t.Errorf("%s: not in a base unit (seconds, bytes)", n)
			}
		}
		typ, gathered := types[n]
		switch {
		case !gathered:
		case typ == dto.MetricType_COUNTER && !strings.HasSuffix(n, "_total"):
			t.Errorf("%s: a counter without _total", n)
		case typ != dto.MetricType_COUNTER && strings.HasSuffix(n, "_total"):
			t.Errorf("%s: a %s ending in _total", n, typ)
		}
	}
	if seedSeen != len(seedOutboxMetrics) {
		t.Errorf("%d of seed 000's %d outbox metrics registered under their names", seedSeen, len(seedOutboxMetrics))
	}
	if buildInfo == nil || len(buildInfo.GetMetric()) != 1 || buildInfo.GetMetric()[0].GetGauge().GetValue() != 1 ||
		labelOf(buildInfo.GetMetric()[0], "version") == "" || labelOf(buildInfo.GetMetric()[0], "goversion") == "" {
		t.Errorf("roomcell_build_info: %v", buildInfo)
	}
	if target == nil || len(target.GetMetric()) == 0 || labelOf(target.GetMetric()[0], "service_name") != serviceName {
		t.Errorf("target_info does not name the service %q: %v", serviceName, target)
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
