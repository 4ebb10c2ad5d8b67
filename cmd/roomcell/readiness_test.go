package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/actors/supervise"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/ownership"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// A background worker that panics on every round is a metric and a log
// line, not an unready node: /readyz stays up, commands keep working and
// the restart metric counts every restart.
func TestPanickingWorkerLeavesTheNodeReady(t *testing.T) {
	app, rc := startDev(t, nil)
	rounds := make(chan struct{}, 100)
	if _, err := supervise.StartPoller(app.workerSup, supervise.PollerSpec[struct{}]{Name: "panicker", New: func() supervise.Round[struct{}] {
		return func(context.Context) (time.Duration, struct{}) {
			select {
			case rounds <- struct{}{}:
			default:
			}
			panic("a row every relay claims")
		}
	}}); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) { return opsGet(t, app, path) }
	restarts := regexp.MustCompile(`roomcell_worker_restarts_total\{worker="panicker"\} (\d+)`)
	ctx := ctxT(t)
	sawDown := false
	for i := 0; ; i++ {
		if code, body := get("/readyz"); code != 200 {
			t.Fatalf("/readyz %d %q while a worker restarts", code, body)
		}
		_, metrics := get("/metrics")
		if regexp.MustCompile(`roomcell_workers_down 1`).MatchString(metrics) {
			sawDown = true
		}
		n := 0
		if m := restarts.FindStringSubmatch(metrics); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		// Commands work between the panics.
		room := fmt.Sprint("ready-", i)
		if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c-" + room, AppCode: "app", RoomId: room, UserId: "u1", Name: room}); err != nil {
			t.Fatalf("CreateRoom while a worker restarts: %v", err)
		}
		if n >= 3 && sawDown {
			if app.workerHealth.Restarts("panicker") < n {
				t.Fatalf("health counts %d restarts, metric %d", app.workerHealth.Restarts("panicker"), n)
			}
			return
		}
		if i > 200 {
			t.Fatalf("after %d checks: %d restarts counted, workers_down seen %v; want 3 restarts and the gauge", i, n, sawDown)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// opsGet reads path from the app's ops HTTP listener.
func opsGet(t *testing.T, app *App, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + app.HTTPAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// readyz reads /readyz with a client deadline well above what an answer
// from the cached round takes, and reports how long it took.
func readyz(t *testing.T, app *App) (int, string, time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	resp, err := c.Get("http://" + app.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), time.Since(start)
}

// The room store going away (refused, then hanging) makes the node
// unready within one probe round plus the probe deadline; /readyz itself
// never waits on the store; the node is ready again once the store is
// back.
func TestReadyzFollowsTheStore(t *testing.T) {
	mcfg, _ := mysqltest.NewDatabase(t)
	proxy := mysqltest.StartProxy(t, mcfg.DSN)
	// A deadline well above what a /readyz answer may take (1 s on a
	// loaded machine): a /readyz that waited on the hanging store would
	// take the whole deadline.
	const interval, timeout = 100 * time.Millisecond, 2 * time.Second
	app, _ := startDev(t, func(c *configs.Config) {
		c.Store.Kind = "mysql"
		c.TencentIM.AllowFake = true
		c.MySQL = mcfg
		c.MySQL.DSN = proxy.DSN()
		c.MySQL.QueryTimeout = time.Second
		c.Room.StoreTimeout = time.Second
		c.HTTP.Readiness.ProbeInterval, c.HTTP.Readiness.ProbeTimeout = interval, timeout
	})
	// Within a round, its deadline and scheduling slack on a busy machine.
	bound := 2*interval + timeout + time.Second
	await := func(what string, wantCode int, wantBody string) {
		t.Helper()
		start := time.Now()
		for {
			code, body, took := readyz(t, app)
			if took > time.Second {
				t.Fatalf("%s: /readyz took %s: it must answer from the last round, not wait on the store", what, took)
			}
			if code == wantCode && strings.Contains(body, wantBody) {
				t.Logf("%s: /readyz %d %q after %s", what, code, strings.TrimSpace(body), time.Since(start).Round(time.Millisecond))
				return
			}
			if time.Since(start) > bound {
				t.Fatalf("%s: /readyz still %d %q after %s", what, code, body, bound)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	await("store up", 200, "ready")
	proxy.Cut()
	await("store refusing", 503, "store")
	proxy.Restore()
	await("store back", 200, "ready")
	proxy.Stall()
	await("store hanging", 503, "store")
	proxy.Restore()
	await("store back again", 200, "ready")
	_, metrics := opsGet(t, app, "/metrics")
	if !strings.Contains(metrics, `roomcell_readiness_probe_ok{probe="store"} 1`) || !strings.Contains(metrics, `roomcell_readiness_probe_ok{probe="cluster"} 1`) {
		t.Fatalf("probe gauges missing or not 1:\n%s", grepLines(metrics, "roomcell_readiness_probe_ok"))
	}
}

// A probe that ignores its context is abandoned at the deadline and
// counts as failed; a round older than two intervals plus the deadline
// (the loop is stuck) fails too; each state change is logged once.
func TestReadinessProbeDeadlineAndStaleness(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var hang atomic.Bool
	r, err := newReadiness([]probe{
		{name: "fine", check: func(context.Context) error { return nil }},
		{name: "deaf", check: func(context.Context) error {
			if hang.Load() {
				<-release // ignores its context
			}
			return nil
		}},
	}, time.Hour, 100*time.Millisecond, log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r.round()
	if why := r.failing(time.Now()); why != "" {
		t.Fatalf("all probes pass, failing %q", why)
	}
	hang.Store(true)
	for range 3 {
		start := time.Now()
		r.round()
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a round with a deaf probe took %s, deadline 100ms", took)
		}
	}
	if why := r.failing(time.Now()); why != "probe failing: deaf" {
		t.Fatalf("failing %q, want the deaf probe named", why)
	}
	mu.Lock()
	n := strings.Count(logs.String(), "readiness probe failing")
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d failing lines for three failed rounds, want 1:\n%s", n, logs.String())
	}
	hang.Store(false)
	r.round()
	if why := r.failing(time.Now()); why != "" {
		t.Fatalf("recovered, failing %q", why)
	}
	if why := r.failing(time.Now().Add(2*time.Hour + time.Second)); !strings.Contains(why, "last ran") {
		t.Fatalf("a round two intervals old: failing %q, want it called stale", why)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type fakeLease struct{ serving atomic.Bool }

func (f *fakeLease) Serving() bool { return f.serving.Load() }

// The lease probe follows the ownership table's renewal; a table without
// leases (no etcd) has no lease probe.
func TestReadinessLeaseProbe(t *testing.T) {
	lease := &fakeLease{}
	a := &App{owners: struct {
		ownership.Table
		*fakeLease
	}{ownership.NewView(4), lease}}
	var check func(context.Context) error
	for _, p := range a.readinessProbes() {
		if p.name == "lease" {
			check = p.check
		}
	}
	if check == nil {
		t.Fatal("no lease probe with a leased ownership table")
	}
	if err := check(t.Context()); err == nil {
		t.Fatal("lease probe passes while the lease is not renewed")
	}
	lease.serving.Store(true)
	if err := check(t.Context()); err != nil {
		t.Fatalf("lease probe with a renewed lease: %v", err)
	}
	for _, p := range (&App{owners: ownership.NewView(4)}).readinessProbes() {
		if p.name == "lease" {
			t.Fatal("a lease probe without leases")
		}
	}
}

// With etcd ownership, etcd going away (behind a relay the test cuts) makes
// the node unready once its shard lease can no longer be trusted: the
// lease probe fails within the lease TTL plus a round, /readyz never waits
// on etcd, and the node is ready again once etcd is back.
func TestReadyzFollowsTheShardLease(t *testing.T) {
	etcd := os.Getenv("ROOMCELL_TEST_ETCD")
	if etcd == "" {
		etcd = "127.0.0.1:23790"
	}
	// A plain TCP relay (the MySQL proxy only reads the address of the DSN).
	relay := mysqltest.StartProxy(t, "u@tcp("+etcd+")/")
	app, _ := startDev(t, func(c *configs.Config) {
		c.TencentIM.AllowFake = true
		c.Cluster.Provider = configs.ProviderEtcd
		c.Cluster.Host, c.Cluster.Port = "127.0.0.1", 0
		c.Cluster.EtcdEndpoints = []string{relay.Addr()}
		c.Cluster.EtcdBaseKey = fmt.Sprintf("/roomcell-test/readyz-lease-%d", time.Now().UnixNano())
		c.HTTP.Readiness.ProbeInterval, c.HTTP.Readiness.ProbeTimeout = 100*time.Millisecond, 300*time.Millisecond
	})
	leaseOK := regexp.MustCompile(`roomcell_readiness_probe_ok\{probe="lease"\} (\d)`)
	await := func(what string, bound time.Duration, ok func(code int, body, metrics string) bool) {
		t.Helper()
		start := time.Now()
		for {
			code, body, took := readyz(t, app)
			if took > time.Second {
				t.Fatalf("%s: /readyz took %s: it must not wait on etcd", what, took)
			}
			_, metrics := opsGet(t, app, "/metrics")
			if ok(code, body, metrics) {
				t.Logf("%s: /readyz %d %q after %s", what, code, strings.TrimSpace(body), time.Since(start).Round(time.Millisecond))
				return
			}
			if time.Since(start) > bound {
				m := leaseOK.FindStringSubmatch(metrics)
				t.Fatalf("%s: after %s /readyz %d %q, lease probe gauge %v", what, bound, code, body, m)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	leaseIs := func(metrics, v string) bool {
		m := leaseOK.FindStringSubmatch(metrics)
		return m != nil && m[1] == v
	}
	await("etcd up", 5*time.Second, func(code int, _, metrics string) bool { return code == 200 && leaseIs(metrics, "1") })
	relay.Cut()
	// The lease is trusted until TTL minus margin after its last renewal.
	ttl := app.cfg.Cluster.ShardLeaseTTL
	await("etcd cut", ttl+2*time.Second, func(code int, _, metrics string) bool { return code == 503 && leaseIs(metrics, "0") })
	relay.Restore()
	await("etcd back", 20*time.Second, func(code int, _, metrics string) bool { return code == 200 && leaseIs(metrics, "1") })
}

// With several room databases one that fails leaves the node ready and
// is listed as degraded; every one failing makes it unready; a probe
// that is not a room database's still does on its own.
func TestReadinessRoomDatabasesDegradeBeforeUnready(t *testing.T) {
	var aDown, bDown, clusterDown atomic.Bool
	check := func(down *atomic.Bool) func(context.Context) error {
		return func(context.Context) error {
			if down.Load() {
				return errors.New("down")
			}
			return nil
		}
	}
	r, err := newReadiness([]probe{
		{name: "room_db@a", roomDB: true, check: check(&aDown)},
		{name: "room_db@b", roomDB: true, check: check(&bDown)},
		{name: "cluster", check: check(&clusterDown)},
	}, time.Hour, time.Second, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r.round()
	if why, deg := r.failing(time.Now()), r.degraded(); why != "" || len(deg) != 0 {
		t.Fatalf("all answer: failing %q, degraded %v", why, deg)
	}
	bDown.Store(true)
	r.round()
	if why, deg := r.failing(time.Now()), r.degraded(); why != "" || !slices.Equal(deg, []string{"room_db@b"}) {
		t.Fatalf("b down: failing %q, degraded %v; want ready, degraded by b", why, deg)
	}
	aDown.Store(true)
	r.round()
	if why := r.failing(time.Now()); why != "probe failing: every room database" {
		t.Fatalf("both down: failing %q, want unready", why)
	}
	aDown.Store(false)
	bDown.Store(false)
	clusterDown.Store(true)
	r.round()
	if why := r.failing(time.Now()); why != "probe failing: cluster" {
		t.Fatalf("cluster down: failing %q", why)
	}
}
