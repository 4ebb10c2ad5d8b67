package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

const alertRules = "../../deploy/prometheus/roomcell-alerts.yml"

// The alert rules are valid, each fires on its failure and stays quiet on
// a healthy store (promtool's unit tests), and every metric they read is
// one a process running every role exports: a renamed metric breaks this
// test, not the page.
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: apt-get install prometheus (deploy/local/services.sh installs it)")
	}
	for _, args := range [][]string{
		{"check", "rules", alertRules},
		{"test", "rules", "../../deploy/prometheus/roomcell-alerts_test.yml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	b, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	app, _ := startDev(t, withNotices)
	var exprs []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		exprs = append(exprs, l)
	}
	name := regexp.MustCompile(`\b(?:room_outbox|notice|roomcell|wallet_gift|retention|grpc_server)_[a-z_]+\b`)
	seen := map[string]bool{}
	// Label values ({table="room_outbox"}) and quoted annotations are not
	// metric names.
	text := regexp.MustCompile(`"[^"\n]*"`).ReplaceAllString(strings.Join(exprs, "\n"), `""`)
	for _, m := range name.FindAllString(text, -1) {
		m = strings.TrimSuffix(m, "_bucket")
		if seen[m] {
			continue
		}
		seen[m] = true
		if slices.Contains(mysqlOnly, m) {
			continue // registered by a MySQL node: TestMySQLPoolMetrics
		}
		probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: m, Help: "probe"})
		if err := app.registry.Register(probe); err == nil {
			app.registry.Unregister(probe)
			t.Errorf("the alert rules read %s, which roomcell does not export", m)
		}
	}
	if len(seen) < 12 {
		t.Fatalf("found %d metric names in the rules", len(seen))
	}
}
