package clustertest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Network puts every node of a cluster in its own network namespace, so
// that one node can be cut off from the others and from etcd and MariaDB
// (a real partition: packets dropped, connections left hanging, nothing
// closed cleanly — unlike SIGSTOP, the node keeps running and its clocks
// keep ticking).
//
// Layout (X is a free subnet index claimed per test, 1..250):
//
//	root namespace: bridge rcbrX, 10.77.X.1/24
//	  ├─ veth rcXvI ── namespace rcX-I: eth0 10.77.X.(11+I)/24, lo
//	  └─ TCP proxies on 10.77.X.1 → 127.0.0.1:3306 (MariaDB), → etcd
//
// MariaDB and etcd keep listening on 127.0.0.1 only; a namespace cannot
// reach the root namespace's loopback, so the test process runs a small
// TCP proxy for each on the bridge address (no DNAT: DNAT to 127.0.0.1
// needs route_localnet and rules in the root namespace, which other tests
// on the machine share). Nodes talk to each other across the bridge; the
// test's clients reach them from the root namespace the same way.
//
// A partition is one nft table in the node's own namespace: everything
// in and out is dropped except the node's client ports (gRPC and HTTP),
// so clients on the node's side of the cut still reach it — the case
// where a cut-off node must stop answering for rooms it no longer holds.
// Nothing in the root namespace changes, so a test that dies leaves no
// rule behind that other tests could trip on; the namespaces and the
// bridge are removed by t.Cleanup, and a later run reclaims the subnet
// of a test process that was killed before it could clean up (the
// bridge's alias names the owning pid).
//
// Needs root (CAP_NET_ADMIN), ip(8) and nft(8): deploy/local/services.sh
// installs nftables. It fails, never skips, when it cannot build the
// network: make test runs as root, and a skipped partition test would
// report a guarantee as tested that was not.
type Network struct {
	t      testing.TB
	index  int
	bridge string
	// Host is the bridge address in the root namespace: the proxies
	// listen on it.
	Host    string
	proxies []*tcpProxy
}

const netnsAliasPrefix = "roomcell-clustertest pid="

// NewNetwork claims a subnet and creates the bridge; AddNode adds each
// node's namespace.
func NewNetwork(t testing.TB) *Network {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the partition harness needs root (network namespaces, veth, nft); run as root like make test does")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the partition harness needs %s: %v (./deploy/local/services.sh installs nftables)", tool, err)
		}
	}
	nw := &Network{t: t}
	for x := 1; x <= 250; x++ {
		name := fmt.Sprintf("rcbr%d", x)
		err := ipCmd("link", "add", name, "type", "bridge")
		if err != nil && strings.Contains(err.Error(), "File exists") && reclaimStale(x) {
			err = ipCmd("link", "add", name, "type", "bridge")
		}
		if err != nil {
			if strings.Contains(err.Error(), "File exists") {
				continue // another test process owns this subnet
			}
			t.Fatalf("partition harness: cannot create a bridge (are we allowed network namespaces here?): %v", err)
		}
		nw.index, nw.bridge = x, name
		break
	}
	if nw.bridge == "" {
		t.Fatal("partition harness: no free subnet among 10.77.1-250.0/24")
	}
	t.Cleanup(nw.destroy)
	nw.Host = fmt.Sprintf("10.77.%d.1", nw.index)
	nw.must("link", "set", nw.bridge, "alias", netnsAliasPrefix+strconv.Itoa(os.Getpid()))
	nw.must("addr", "add", nw.Host+"/24", "dev", nw.bridge)
	nw.must("link", "set", nw.bridge, "up")
	return nw
}

// reclaimStale removes the subnet x's bridge and namespaces if the
// process that created them is gone, and reports whether it did.
func reclaimStale(x int) bool {
	out, err := exec.Command("ip", "-o", "link", "show", fmt.Sprintf("rcbr%d", x)).CombinedOutput()
	if err != nil {
		return false
	}
	i := strings.Index(string(out), netnsAliasPrefix)
	if i < 0 {
		return false
	}
	pid, err := strconv.Atoi(strings.Fields(string(out)[i+len(netnsAliasPrefix):])[0])
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) == nil || pid == os.Getpid() {
		return false
	}
	removeNetwork(x)
	return true
}

// removeNetwork deletes subnet x's veths, namespaces and bridge,
// ignoring what is already gone. The veths go first and by name: a
// namespace whose name is deleted lives on (and keeps its veth pair)
// while the kernel still holds sockets of it, e.g. the TCP connections a
// killed node left behind.
func removeNetwork(x int) {
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	vprefix := fmt.Sprintf("rc%dv", x)
	for _, line := range strings.Split(string(links), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, vprefix) {
			_ = ipCmd("link", "del", name)
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	prefix := fmt.Sprintf("rc%d-", x)
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			_ = ipCmd("netns", "del", f[0])
		}
	}
	_ = ipCmd("link", "del", fmt.Sprintf("rcbr%d", x))
}

func (nw *Network) destroy() {
	for _, p := range nw.proxies {
		p.Close()
	}
	removeNetwork(nw.index)
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (nw *Network) must(args ...string) {
	nw.t.Helper()
	if err := ipCmd(args...); err != nil {
		nw.t.Fatalf("partition harness: %v", err)
	}
}

// AddNode creates namespace rcX-i with its veth on the bridge and returns
// the namespace's name and address.
func (nw *Network) AddNode(i int) (netns, addr string) {
	nw.t.Helper()
	netns = fmt.Sprintf("rc%d-%d", nw.index, i)
	host, peer := fmt.Sprintf("rc%dv%d", nw.index, i), fmt.Sprintf("rc%dp%d", nw.index, i)
	addr = fmt.Sprintf("10.77.%d.%d", nw.index, 11+i)
	nw.must("netns", "add", netns)
	nw.must("link", "add", host, "type", "veth", "peer", "name", peer)
	nw.must("link", "set", host, "master", nw.bridge)
	nw.must("link", "set", host, "up")
	nw.must("link", "set", peer, "netns", netns)
	nw.must("-n", netns, "link", "set", peer, "name", "eth0")
	nw.must("-n", netns, "addr", "add", addr+"/24", "dev", "eth0")
	nw.must("-n", netns, "link", "set", "eth0", "up")
	nw.must("-n", netns, "link", "set", "lo", "up")
	return netns, addr
}

// Proxy forwards connections to the bridge address (a free port) to
// target in the root namespace and returns the address to dial from a
// node's namespace.
func (nw *Network) Proxy(target string) string {
	nw.t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(nw.Host, "0"))
	if err != nil {
		nw.t.Fatalf("partition harness: proxy for %s: %v", target, err)
	}
	p := &tcpProxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	nw.proxies = append(nw.proxies, p)
	go p.serve()
	return l.Addr().String()
}

// partitionRules drops everything in and out of a namespace except
// connections to the listed local TCP ports (the node's client ports).
func partitionRules(clientPorts []string) string {
	ports := strings.Join(clientPorts, ", ")
	return fmt.Sprintf(`table inet roomcell_partition {
	chain input { type filter hook input priority 0; policy drop; iif "lo" accept; tcp dport { %[1]s } accept; }
	chain output { type filter hook output priority 0; policy drop; oif "lo" accept; tcp sport { %[1]s } accept; }
}
`, ports)
}

// cut installs the partition rules in netns.
func cut(netns string, clientPorts []string) error {
	cmd := exec.Command("ip", "netns", "exec", netns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(partitionRules(clientPorts))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s", netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// heal removes them.
func heal(netns string) error {
	out, err := exec.Command("ip", "netns", "exec", netns, "nft", "delete", "table", "inet", "roomcell_partition").CombinedOutput()
	if err != nil {
		return fmt.Errorf("nft in %s: %v: %s", netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// tcpProxy copies bytes both ways between each accepted connection and a
// fresh connection to target. A partitioned node's connections just stall
// here, as they would at a real server behind a cut.
type tcpProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (p *tcpProxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *tcpProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst; when either side ends, both are closed (a
// half-close would leave the MySQL or gRPC peer waiting).
func (p *tcpProxy) pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	_ = err // io.EOF or a reset: the connection is over either way
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

func (p *tcpProxy) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.l.Close()
	for c := range conns {
		c.Close()
	}
}

var errNoNetns = errors.New("node is not in a network namespace (Options.Netns)")

// listenIn opens a TCP listener inside namespace netns: the socket is
// created on an OS thread moved into the namespace (setns), and stays in
// it after the thread moves back.
func listenIn(netns, addr string) (net.Listener, error) {
	target, err := os.Open("/run/netns/" + netns)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
	if err != nil {
		return nil, err
	}
	defer home.Close()
	runtime.LockOSThread()
	if err := setns(target); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	l, lerr := net.Listen("tcp", addr)
	if err := setns(home); err != nil {
		// The thread is stuck in the namespace: keep it locked so the
		// runtime retires it instead of reusing it.
		if l != nil {
			l.Close()
		}
		return nil, fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return l, lerr
}

func setns(f *os.File) error {
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", f.Name(), err)
	}
	return nil
}
