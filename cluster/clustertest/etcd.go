package clustertest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdCluster is an etcd cluster of the test's own: n etcd processes on
// free loopback ports with data directories under the test's temporary
// directory, so a test may kill or freeze members (the shared etcd on
// :23790 is never touched). Heartbeat and election timeouts are etcd's
// defaults (100 ms, 1 s), as in the deploy files, with pre-vote on.
type EtcdCluster struct {
	Members []*EtcdMember
}

// EtcdMember is one etcd process (restartable: same name, ports and data).
type EtcdMember struct {
	Name       string
	ClientURL  string
	PeerURL    string
	dataDir    string
	logPath    string
	initial    string
	clusterTok string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartEtcdCluster starts n members and waits until the cluster has a
// leader and answers a write through every member.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatal("etcd is missing: apt-get install etcd-server (deploy/local/services.sh installs it)")
	}
	dir := t.TempDir()
	c := &EtcdCluster{}
	var initial []string
	for i := range n {
		m := &EtcdMember{
			Name:      fmt.Sprintf("etcd-%d", i),
			ClientURL: "http://" + freeAddr(t),
			PeerURL:   "http://" + freeAddr(t),
			dataDir:   filepath.Join(dir, fmt.Sprintf("etcd-%d", i)),
			logPath:   filepath.Join(dir, fmt.Sprintf("etcd-%d.log", i)),
		}
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
	}
	tok := fmt.Sprintf("roomcell-test-%d", time.Now().UnixNano())
	for _, m := range c.Members {
		m.initial, m.clusterTok = strings.Join(initial, ","), tok
		m.start(t, bin)
	}
	t.Cleanup(func() {
		for _, m := range c.Members {
			m.Kill()
		}
		if t.Failed() {
			for _, m := range c.Members {
				b, _ := os.ReadFile(m.logPath)
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("---- %s log tail ----\n%s", m.Name, strings.Join(lines[max(0, len(lines)-20):], "\n"))
			}
		}
	})
	c.WaitHealthy(t, 30*time.Second)
	return c
}

// Endpoints are the members' client addresses (host:port), the form
// cluster.etcd_endpoints takes.
func (c *EtcdCluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = strings.TrimPrefix(m.ClientURL, "http://")
	}
	return out
}

func (m *EtcdMember) start(t testing.TB, bin string) {
	t.Helper()
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--name", m.Name, "--data-dir", m.dataDir,
		"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", m.initial, "--initial-cluster-token", m.clusterTok,
		"--initial-cluster-state", "new", "--logger", "zap", "--log-outputs", "stderr",
		// etcd 3.5 (the deploy files' image) runs pre-vote by default; the
		// Debian 3.4 binary does not. Without it a member left alone keeps
		// raising its term, and the members that come back wait out extra
		// election rounds (1.4–4.5 s to a leader after a quorum loss here).
		"--pre-vote")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
}

// Restart starts a killed member again on its data directory.
func (m *EtcdMember) Restart(t testing.TB) {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatal(err)
	}
	m.start(t, bin)
}

func (m *EtcdMember) signal(sig syscall.Signal) {
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (m *EtcdMember) Kill() {
	m.mu.Lock()
	ch := m.exited
	m.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
		return
	default:
	}
	m.signal(syscall.SIGCONT)
	m.signal(syscall.SIGKILL)
	<-ch
}

// Pause freezes the member (SIGSTOP); Resume continues it.
func (m *EtcdMember) Pause()  { m.signal(syscall.SIGSTOP) }
func (m *EtcdMember) Resume() { m.signal(syscall.SIGCONT) }

// client is a client of the given members only.
func etcdClient(t testing.TB, ms ...*EtcdMember) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.ClientURL)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// Leader returns the member that is the leader now, or nil.
func (c *EtcdCluster) Leader(t testing.TB) *EtcdMember {
	t.Helper()
	return leaderOf(t, c.Members, time.Second)
}

// leaderOf is the member of ms that is the leader now, or nil; wait
// bounds each member's answer (a frozen member never answers).
func leaderOf(t testing.TB, ms []*EtcdMember, wait time.Duration) *EtcdMember {
	t.Helper()
	for _, m := range ms {
		cli := etcdClient(t, m)
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		st, err := cli.Status(ctx, m.ClientURL)
		cancel()
		cli.Close()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return m
		}
	}
	return nil
}

// WaitHealthy waits until a linearizable read answers through every
// running member (a leader is elected and the member is caught up).
func (c *EtcdCluster) WaitHealthy(t testing.TB, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for _, m := range c.Members {
		cli := etcdClient(t, m)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := cli.Get(ctx, "/health-probe")
			cancel()
			if err == nil {
				break
			}
			if time.Since(start) > d {
				cli.Close()
				b, _ := os.ReadFile(m.logPath)
				t.Fatalf("etcd member %s not healthy after %s: %v\n%s", m.Name, d, err, b[max(0, len(b)-3000):])
			}
			time.Sleep(100 * time.Millisecond)
		}
		cli.Close()
	}
	return time.Since(start)
}

// Leases lists the etcd leases granted now (through any running member).
func (c *EtcdCluster) Leases(t testing.TB, via *EtcdMember) map[clientv3.LeaseID]bool {
	t.Helper()
	cli := etcdClient(t, via)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r, err := cli.Leases(ctx)
	if err != nil {
		t.Fatalf("etcd leases: %v", err)
	}
	out := map[clientv3.LeaseID]bool{}
	for _, l := range r.Leases {
		out[l.ID] = true
	}
	return out
}

// ShardKeys returns key -> create revision of every shard key under the
// cluster's ownership prefix (read through via).
func (c *EtcdCluster) ShardKeys(t testing.TB, via *EtcdMember, prefix string) map[string]int64 {
	t.Helper()
	cli := etcdClient(t, via)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("etcd get %s: %v", prefix, err)
	}
	out := map[string]int64{}
	for _, kv := range r.Kvs {
		if strings.Contains(string(kv.Key), "/shards/") {
			out[string(kv.Key)] = kv.CreateRevision
		}
	}
	return out
}

// Requests reads the member's count of gRPC messages received, by method
// (grpc_server_msg_received_total: a unary call is one, a keepalive or
// watch stream counts each message), from its /metrics.
func (m *EtcdMember) Requests(t testing.TB) map[string]float64 {
	t.Helper()
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(m.ClientURL + "/metrics")
	if err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, "grpc_server_msg_received_total{") {
			continue
		}
		i := strings.Index(line, `grpc_method="`)
		j := strings.LastIndexByte(line, ' ')
		if i < 0 || j < 0 {
			continue
		}
		method := line[i+len(`grpc_method="`):]
		method = method[:strings.IndexByte(method, '"')]
		v, err := strconv.ParseFloat(line[j+1:], 64)
		if err == nil {
			out[method] += v
		}
	}
	return out
}
