package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Every metric the Grafana dashboard queries is registered by a process
// running every role: a renamed metric breaks this test, not the
// operators' dashboard.
func TestGrafanaDashboardQueriesExistingMetrics(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/roomcell.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	app, _ := startDev(t, withNotices)
	name := regexp.MustCompile(`\b(?:room_outbox|notice|roomcell_cluster|room_directory|presence)_[a-z_]+\b`)
	seen := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Fatalf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: m, Help: "probe"})
				if err := app.registry.Register(probe); err == nil {
					app.registry.Unregister(probe)
					t.Errorf("panel %q queries %s, which roomcell does not export", p.Title, m)
				}
				seen++
			}
		}
	}
	if seen < 12 {
		t.Fatalf("found %d metric references in the dashboard", seen)
	}
}
