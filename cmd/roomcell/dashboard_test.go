package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// storeWide are the gauges every node reads from the same store: the
// dashboard must combine them with max() (sum() over N nodes reads N times
// the backlog).
var storeWide = []string{
	"room_outbox_pending_total", "roomcell_room_outbox_parked_rows", "room_outbox_oldest_pending_age_ms", "roomcell_room_outbox_mq_pending",
	"roomcell_notice_dead_letters", "roomcell_notice_open", "roomcell_notice_oldest_due_age_seconds",
	"roomcell_wallet_gift_holds_open", "roomcell_wallet_gift_hold_oldest_age_seconds",
	"roomcell_retention_table_rows_estimate", "roomcell_retention_oldest_row_age_seconds",
}

// mysqlOnly are the families only the MySQL room store registers (the
// dev process the dashboard test starts runs on memdb).
var mysqlOnly = []string{"roomcell_mysql_group_commit_batch_size", "roomcell_mysql_group_commit_seconds"}

// The Grafana dashboard reads right with N nodes and covers what roomcell
// exports: every metric it queries is registered by a process running
// every role (a renamed metric breaks this test, not the operators'
// dashboard), every registered roomcell family has a panel, store-wide
// gauges are only ever max()ed, and per-node queries honour $node.
func TestGrafanaDashboardQueriesExistingMetrics(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/roomcell.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	hasNode := false
	for _, v := range dash.Templating.List {
		hasNode = hasNode || v.Name == "node"
	}
	if !hasNode {
		t.Error("dashboard has no node variable")
	}
	// Every role and the MQ fanout (NATS on this machine), so every
	// family is registered.
	app, _ := startDevWithMQ(t, withNotices)
	name := regexp.MustCompile(`\b(?:room_outbox|notice|roomcell|room_directory|presence|retention|wallet_gift|grpc_server)_[a-z_]+\b`)
	queried := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Fatalf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				m = strings.TrimSuffix(m, "_bucket")
				queried[m] = true
				if slices.Contains(mysqlOnly, strings.TrimSuffix(strings.TrimSuffix(m, "_sum"), "_count")) {
					continue // TestMySQLPoolMetrics checks these on a MySQL node
				}
				probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: m, Help: "probe"})
				if err := app.registry.Register(probe); err == nil {
					app.registry.Unregister(probe)
					t.Errorf("panel %q queries %s, which roomcell does not export", p.Title, m)
				}
			}
			for _, g := range storeWide {
				if strings.Contains(tg.Expr, g) && !regexp.MustCompile(`^max(?: by \([a-z_, ]+\) )?\(`+g+`\)$`).MatchString(tg.Expr) {
					t.Errorf("panel %q: store-wide gauge %s must be max()ed alone: %s", p.Title, g, tg.Expr)
				}
			}
			if !strings.Contains(tg.Expr, "max(") && !strings.Contains(tg.Expr, "max by") && !strings.Contains(tg.Expr, `instance=~"$node"`) {
				t.Errorf("panel %q: a per-node query ignores $node: %s", p.Title, tg.Expr)
			}
		}
	}
	families := 0
	for _, n := range registeredFamilies(t, app.registry) {
		if strings.HasPrefix(n, "go_") || strings.HasPrefix(n, "process_") || strings.HasPrefix(n, "promhttp_") || n == "target_info" {
			continue
		}
		families++
		if !queried[n] {
			t.Errorf("metric family %s has no panel", n)
		}
	}
	if families < 30 {
		t.Fatalf("a dev process with every role registered %d roomcell families", families)
	}
}

// registeredFamilies is every family the registry describes (a labelled
// family with no series yet included) and every family it gathers (the
// OTel bridge describes none up front), without the _bucket/_sum/_count
// of histograms.
func registeredFamilies(t *testing.T, reg *metricsRegistry) []string {
	t.Helper()
	seen := map[string]bool{}
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			seen[m[1]] = true
		}
	}
	if len(seen) < 30 {
		t.Fatalf("the registry describes %d families", len(seen))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
