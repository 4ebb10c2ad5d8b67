//go:build !race

package clustertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const dashboardFile = repoRoot + "/deploy/grafana/roomcell.json"

// promQuery runs one instant query against the Prometheus at base and
// returns its vector's samples as labels -> value.
func promQuery(t *testing.T, base, q string) (map[string]float64, error) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %s", err, b)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, r.Error)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		out[fmt.Sprint(s.Metric)] = v
	}
	return out, nil
}

// startPrometheus runs Debian's Prometheus scraping targets every second,
// on a free port and a data directory of the test's own, and waits until
// it is ready.
func startPrometheus(t *testing.T, targets []string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is missing: apt-get install prometheus (deploy/local/services.sh installs it)")
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: roomcell\n    static_configs:\n      - targets: [%s]\n",
		strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--storage.tsdb.retention.time=1h")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b[max(0, len(b)-3000):])
		}
	})
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("prometheus not ready after 30s")
		}
	}
}

// A real Prometheus scrapes a local three-node cluster (every role,
// MariaDB, etcd, Redis, the NATS fanout) under load with a short IM
// outage in the middle: every query of the
// Grafana dashboard returns data, and its panels agree with the store and
// the cluster: the store-wide gauges read the store's own counts on every
// node (so their max() is the store's number, where a sum() would read it
// three times), the per-node sends of room_outbox rows (publishers and
// relays) add up to the rows the store has published, and the per-node
// activations add up to what
// the members report.
func TestMultiMemberPrometheusScrape(t *testing.T) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	c := New(t, Options{Nodes: 3, BinDir: binDir, Edit: func(i int, nc *NodeConfig) {
		nc.Redis = map[string]any{"enabled": true, "addr": "127.0.0.1:6379", "key_prefix": "roomcell-prom-" + suffix + ":"}
		nc.Extra = map[string]any{
			"roles": []string{"room", "wallet", "relay", "notice"},
			"notice": map[string]any{
				"wallet_notice_worker": map[string]any{"enabled": true, "poll_interval": "200ms"},
				"room_notice_worker":   map[string]any{"enabled": true, "poll_interval": "200ms"},
				"mq": map[string]any{"enabled": true, "kind": "nats", "servers": []string{"nats://127.0.0.1:4222"},
					"room_outbox": map[string]any{"enabled": true, "topic": "roomcell_prom_" + suffix, "consumer_group": "hyapp-notice-prom-" + suffix}},
			},
		}
	}})
	targets := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		targets[i] = n.HTTPAddr
	}
	prom := startPrometheus(t, targets)

	rooms := RoomIDs(30)
	CreateRooms(t, c.Nodes, rooms, 6)
	load := &Load{Nodes: c.Nodes, Rooms: rooms}
	load.Start(t, 6)
	time.Sleep(8 * time.Second)
	// A short IM outage on every node: the rooms' publishers fail and give
	// their rows to the relays, so both senders have sends to count.
	for _, n := range c.Nodes {
		resp, err := http.Post("http://"+n.HTTPAddr+"/debug/fake-im/outage?for=3s", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("fake IM outage on %s: %s", n.ID, resp.Status)
		}
	}
	time.Sleep(12 * time.Second)
	load.Stop()
	res := load.Result()
	t.Logf("load: %+v", res)
	published := c.WaitOutboxPublished(t, 60*time.Second)

	// Parked rows are a store-wide fact every node's relay reports: park
	// a few published rows' worth by hand and let the relays see them.
	// With several room databases each relay reports its own database's
	// (label room_db).
	parkedIn := map[string]int{}
	var parked, publishedNow int
	c.eachRoomDB(t, func(ctx context.Context, rdb *RoomDB) error {
		if _, err := rdb.DB.ExecContext(ctx, "UPDATE room_outbox SET status = 'parked', last_error = 'prometheus test' WHERE status = 'published' ORDER BY created_at_ms LIMIT 5"); err != nil {
			return err
		}
		var p, pub int
		if err := rdb.DB.QueryRowContext(ctx, "SELECT COALESCE(SUM(status = 'parked'), 0), COALESCE(SUM(status = 'published'), 0) FROM room_outbox").Scan(&p, &pub); err != nil {
			return err
		}
		parkedIn[rdb.Key] = p
		parked, publishedNow = parked+p, publishedNow+pub
		return nil
	})
	// Let every relay run a batch and Prometheus scrape it, and the 5m
	// rate windows hold at least two samples of everything.
	time.Sleep(8 * time.Second)

	b2, err := os.ReadFile(dashboardFile)
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
	}
	if err := json.Unmarshal(b2, &dash); err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := strings.ReplaceAll(tg.Expr, "$node", ".*")
			got, err := promQuery(t, prom, q)
			queries++
			if err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
				continue
			}
			if len(got) == 0 {
				t.Errorf("panel %q: no data for %s", p.Title, q)
			}
		}
	}

	// Store-wide gauges: each node reads the store's number; max() is it
	// (per room database when there are several).
	multi := len(c.RoomDBs) > 1
	for _, rdb := range c.RoomDBs {
		sel, series := "", "map[]"
		if multi {
			sel, series = fmt.Sprintf(`{room_db=%q}`, rdb.Key), "map[room_db:"+rdb.Key+"]"
		}
		for q, want := range map[string]float64{
			"max(roomcell_room_outbox_parked_rows" + sel + ")": float64(parkedIn[rdb.Key]),
			"min(roomcell_room_outbox_parked_rows" + sel + ")": float64(parkedIn[rdb.Key]),
			"max(room_outbox_pending_total" + sel + ")":        0,
		} {
			got, err := promQuery(t, prom, q)
			if err != nil || len(got) != 1 {
				t.Errorf("%s: %v %v", q, got, err)
				continue
			}
			for _, v := range got {
				if v != want {
					t.Errorf("%s = %v, the store has %v", q, v, want)
				}
			}
		}
		by := ""
		if multi {
			by = " by (room_db)"
		}
		if got, _ := promQuery(t, prom, "count"+by+"(roomcell_room_outbox_parked_rows)"); len(got) != len(c.RoomDBs) || got[series] != 3 {
			t.Errorf("count%s(roomcell_room_outbox_parked_rows) = %v: want one series per node (3) for %s", by, got, series)
		}
	}
	// Per-node sends of room_outbox rows (both senders) cover the rows
	// the store marked published (the parked ones were published too):
	// never fewer. They count successful sends, and delivery is at least
	// once, so a row sent again (by the relay after a sender's lease ran
	// out, or after a mark that did not land) counts again: runs with the
	// IM outage here counted 2–8 sends more than rows in 7,000–10,000
	// (why exactly is not traced). More than 1% over is a counting bug.
	got, err := promQuery(t, prom, "sum(room_outbox_publish_success_total)")
	if err != nil || len(got) != 1 {
		t.Fatalf("sum of sends: %v %v", got, err)
	}
	if publishedNow+parked != published {
		t.Errorf("the store published %d rows, but %d now published + %d parked", published, publishedNow, parked)
	}
	for _, v := range got {
		if int(v) < published || float64(int(v)-published) > 0.01*float64(published) {
			t.Errorf("sum(room_outbox_publish_success_total) = %v; the store published %d rows (%d now published + %d parked by the test)",
				v, published, publishedNow, parked)
		}
		t.Logf("sends %v for %d published rows", v, published)
	}
	bySender, _ := promQuery(t, prom, "sum by (sender) (room_outbox_publish_success_total)")
	t.Logf("sends by sender: %v", bySender)
	if bySender["map[sender:relay]"] == 0 || bySender["map[sender:publisher]"] == 0 {
		t.Errorf("sends by sender %v: after the outage both the publishers and the relays should have sent rows", bySender)
	}
	failures, _ := promQuery(t, prom, "sum(room_outbox_publish_failure_total)")
	t.Logf("failed sends: %v", failures)
	// Per-node activations add up to the rooms the members say they host.
	var hosted int32
	for _, m := range c.Nodes[0].Members(t).GetMembers() {
		hosted += m.GetRooms()
	}
	got, err = promQuery(t, prom, `sum(roomcell_cluster_activations)`)
	if err != nil || len(got) != 1 {
		t.Fatalf("activations: %v %v", got, err)
	}
	for _, v := range got {
		if int32(v) != hosted {
			t.Errorf("sum(roomcell_cluster_activations) = %v, the members report %d rooms hosted", v, hosted)
		}
	}
	t.Logf("%d dashboard queries against 3 nodes; %d rows published, %d parked, %d rooms hosted", queries, published, parked, hosted)
}
