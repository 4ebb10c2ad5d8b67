package clustertest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/persistence/shardmap"
)

// Binary builds ./cmd/roomcell once per test process into dir and
// returns its path.
func Binary(t testing.TB, dir string) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		buildPath = filepath.Join(dir, "roomcell")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/roomcell")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/roomcell: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Options shape a test cluster.
type Options struct {
	Nodes int
	// Etcd is the etcd endpoint (default $ROOMCELL_TEST_ETCD or
	// 127.0.0.1:23790).
	Etcd string
	// BinDir holds the built binary (shared by the tests of a run).
	BinDir string
	// Edit, when set, adjusts every node's configuration before it is
	// written.
	Edit func(i int, c *NodeConfig)
	// EtcdCluster, when set, is the test's own etcd cluster: every node
	// gets all its members as etcd_endpoints (Etcd is ignored).
	EtcdCluster *EtcdCluster
	// MySQLDSN, when set, is the MariaDB server the nodes use (a DSN
	// without a database name, e.g. a mysqltest.Server of the test's own
	// that it may pause); by default the shared server.
	MySQLDSN string
	// Netns puts every node in a network namespace of its own (Network:
	// needs root), so Node.Partition can cut it off. Without it the nodes
	// share the loopback.
	Netns bool
	// RoomDBs is the number of room databases the rooms' shards are
	// split across (mysql.room_dbs, mysql.room_shards): 0 takes
	// $ROOMCELL_TEST_ROOM_DBS (default 1), so the whole suite runs on
	// several databases with `make multimember-2db`. See roomdbs.go.
	RoomDBs int
	// RoomDBServer, when set, is the MariaDB server (a DSN without a
	// database name) of the room databases beyond the first: a
	// mysqltest.Server of the test's own that it may pause while the
	// first database's server answers.
	RoomDBServer string
}

// NodeConfig is the YAML written for one node: only the keys the harness
// sets; the rest take configs' defaults.
type NodeConfig struct {
	NodeID string `yaml:"node_id"`
	// AllowInsecure is set for nodes in network namespaces of their own:
	// their gRPC listens on the namespace's address, beyond loopback,
	// without tokens or TLS, and only the test reaches it.
	AllowInsecure bool           `yaml:"allow_insecure,omitempty"`
	Log           map[string]any `yaml:"log"`
	GRPC          map[string]any `yaml:"grpc"`
	HTTP          map[string]any `yaml:"http"`
	Store         map[string]any `yaml:"store"`
	MySQL         map[string]any `yaml:"mysql"`
	Redis         map[string]any `yaml:"redis"`
	Room          map[string]any `yaml:"room"`
	Outbox        map[string]any `yaml:"outbox_worker"`
	// Presence is left to its defaults unless a test sets it.
	Presence map[string]any `yaml:"presence,omitempty"`
	IM       map[string]any `yaml:"tencent_im"`
	Clu      map[string]any `yaml:"cluster"`
	// Extra holds any other top-level keys a test sets (roles, notice,
	// retention, ...).
	Extra map[string]any `yaml:",inline"`
}

// Cluster is a set of roomcell processes sharing one etcd prefix and
// one MariaDB database (Database, DB: wallet, notice and mysql.dsn's
// rooms), or, with Options.RoomDBs, rooms split across several
// (RoomDBs).
type Cluster struct {
	t        testing.TB
	bin      string
	dir      string
	Database string
	DB       *sql.DB
	// RoomDBs are the room databases, in the shard map's order: one
	// (Database) unless Options.RoomDBs asks for more.
	RoomDBs []*RoomDB
	roomMap *shardmap.Map
	Nodes   []*Node
	// Net is the namespaces' network when Options.Netns is set.
	Net *Network
	// Etcd is Options.EtcdCluster; BaseKey the nodes' etcd_base_key.
	Etcd    *EtcdCluster
	BaseKey string
}

// Node is one roomcell process (restartable with the same config: same
// node id, same ports).
type Node struct {
	ID          string
	GRPCAddr    string
	HTTPAddr    string
	ClusterAddr string
	cfgPath     string
	logPath     string
	bin         string
	// netns is the node's network namespace (Options.Netns), "" on the
	// shared loopback.
	netns string

	mu      sync.Mutex
	answers []time.Time // when the harness's clients got a reply from this node (noteAnswer)
	calls   []Call      // every attempt the harness's clients made through this node
	refused int         // retryable errors they got from it
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	conn    *grpc.ClientConn
}

// New writes the configurations, starts node 0 (it migrates the schema),
// then the others, and waits until all are ready.
func New(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Etcd == "" {
		o.Etcd = os.Getenv("ROOMCELL_TEST_ETCD")
		if o.Etcd == "" {
			o.Etcd = "127.0.0.1:23790"
		}
	}
	if o.BinDir == "" {
		o.BinDir = t.TempDir()
	}
	c := &Cluster{t: t, bin: Binary(t, o.BinDir), dir: t.TempDir()}
	var mcfg configs.MySQLConfig
	var database string
	if o.MySQLDSN != "" {
		mcfg, database = mysqltest.NewDatabaseOn(t, o.MySQLDSN)
	} else {
		mcfg, database = mysqltest.NewDatabase(t)
	}
	c.Database = database
	c.DB = openDB(t, mcfg.DSN, database)
	c.RoomDBs = []*RoomDB{{Key: configs.DefaultRoomDB, Config: mcfg, DB: c.DB}}
	dsn := mcfg.DSN
	if o.Netns {
		// Nodes reach MariaDB and etcd through proxies on the bridge.
		c.Net = NewNetwork(t)
		dsn = c.Net.proxyDSN(t, mcfg.DSN)
		o.Etcd = c.Net.Proxy(o.Etcd)
	}
	c.addRoomDBs(t, o)
	endpoints := []string{o.Etcd}
	if o.EtcdCluster != nil {
		endpoints = o.EtcdCluster.Endpoints()
		if c.Net != nil {
			for i, ep := range endpoints {
				endpoints[i] = c.Net.Proxy(ep)
			}
		}
		c.Etcd = o.EtcdCluster
	}
	baseKey := fmt.Sprintf("/roomcell-test/%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	c.BaseKey = baseKey
	for i := range o.Nodes {
		n := &Node{ID: fmt.Sprintf("node-%d", i+1), bin: c.bin}
		host := "127.0.0.1"
		if c.Net != nil {
			// A namespace of its own: the ports are free by construction.
			n.netns, host = c.Net.AddNode(i)
			n.GRPCAddr, n.HTTPAddr, n.ClusterAddr = host+":7000", host+":7001", host+":7002"
		} else {
			n.GRPCAddr, n.HTTPAddr, n.ClusterAddr = freeAddr(t), freeAddr(t), freeAddr(t)
		}
		n.cfgPath = filepath.Join(c.dir, n.ID+".yaml")
		n.logPath = filepath.Join(c.dir, n.ID+".log")
		_, cport, _ := net.SplitHostPort(n.ClusterAddr)
		nc := NodeConfig{
			NodeID: n.ID,
			Log:    map[string]any{"level": "info", "format": "json"},
			GRPC:   map[string]any{"addr": n.GRPCAddr, "command_timeout": "5s", "shutdown_timeout": "5s"},
			HTTP:   map[string]any{"addr": n.HTTPAddr},
			Store:  map[string]any{"kind": "mysql"},
			MySQL: map[string]any{"dsn": dsn, "room_database": database, "wallet_database": database,
				"notice_database": database, "auto_migrate": i == 0, "max_open_conns": 16},
			Redis:  map[string]any{"enabled": false},
			Room:   map[string]any{"publish_timeout": "1s"},
			Outbox: map[string]any{"enabled": true, "poll_interval": "200ms", "publish_timeout": "1s", "lease_ttl": "3s"},
			IM:     map[string]any{"enabled": false, "allow_fake": true},
			Clu: map[string]any{"provider": "etcd", "host": host, "port": atoi(cport),
				"etcd_endpoints": endpoints, "etcd_base_key": baseKey, "request_timeout": "2s",
				"etcd_lease_ttl": "3s", "drain_timeout": "5s"},
		}
		nc.AllowInsecure = c.Net != nil
		if o.Edit != nil {
			o.Edit(i, &nc)
		}
		c.writeShardMap(t, &nc)
		b, err := yaml.Marshal(nc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n.cfgPath, b, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := configs.Load(n.cfgPath)
		if err != nil {
			t.Fatalf("harness wrote a config the loader refuses: %v", err)
		}
		if i == 0 {
			c.readShardMap(t, cfg)
		}
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("---- %s log tail ----\n%s", n.ID, n.LogTail(40))
			}
			// A failed test's nodes then print every goroutine's stack
			// into their logs (Go's SIGQUIT), kept below: what a stalled
			// room waits for.
			for _, n := range c.Nodes {
				n.Dump(5 * time.Second)
			}
		}
		for _, n := range c.Nodes {
			n.Kill()
		}
		if t.Failed() {
			// The whole logs outlive the test's temporary directory.
			keep := filepath.Join(os.TempDir(), "roomcell-clustertest-failed",
				fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().Unix()))
			if err := os.MkdirAll(keep, 0o755); err == nil {
				for _, n := range c.Nodes {
					if b, err := os.ReadFile(n.logPath); err == nil {
						_ = os.WriteFile(filepath.Join(keep, n.ID+".log"), b, 0o644)
					}
				}
				t.Logf("node logs kept in %s", keep)
			}
		}
	})
	c.Nodes[0].Start(t)
	c.Nodes[0].WaitReady(t, 60*time.Second)
	for _, n := range c.Nodes[1:] {
		n.Start(t)
	}
	for _, n := range c.Nodes[1:] {
		n.WaitReady(t, 60*time.Second)
	}
	return c
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// handedOut are the ports freeAddr gave this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freeAddr is a loopback address nobody listens on right now, below
// Linux's ephemeral range (32768–60999): a port the kernel picked for
// :0 is also a candidate source port of outgoing connections, and the
// many connections of a multi-process test took one before its node
// bound it ("bind: address already in use"). Never the same port twice
// in one process.
func freeAddr(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if handedOut.ports[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		handedOut.ports[p] = true
		return l.Addr().String()
	}
	t.Fatal("no free loopback port in 20000-31999")
	return ""
}

// Start runs the process (again, after Kill or Term).
func (n *Node) Start(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(n.bin, "--config", n.cfgPath)
	if n.netns != "" {
		// ip execs the binary inside the namespace: same pid, so signals
		// and the parent-death signal reach roomcell itself.
		cmd = exec.Command("ip", "netns", "exec", n.netns, n.bin, "--config", n.cfgPath)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// The node dies with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited = cmd, exited
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.exitErr = err
		n.mu.Unlock()
		close(exited)
	}()
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	ch := n.exited
	n.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// WaitReady polls /readyz until 200.
func (n *Node) WaitReady(t testing.TB, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	client := &http.Client{Timeout: time.Second}
	for {
		if !n.Running() {
			t.Fatalf("%s exited before ready:\n%s", n.ID, n.LogTail(30))
		}
		resp, err := client.Get("http://" + n.HTTPAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		if time.Since(start) > d {
			t.Fatalf("%s not ready after %s:\n%s", n.ID, d, n.LogTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *Node) signal(sig syscall.Signal) {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// Kill sends SIGKILL and waits for the exit.
func (n *Node) Kill() {
	if !n.Running() {
		return
	}
	n.signal(syscall.SIGCONT) // a stopped process cannot die until continued
	n.signal(syscall.SIGKILL)
	<-n.exited
}

// Dump makes a running node write every goroutine's stack to its log
// and exit (Go's SIGQUIT), waiting up to d.
func (n *Node) Dump(d time.Duration) {
	if !n.Running() {
		return
	}
	n.signal(syscall.SIGCONT)
	n.signal(syscall.SIGQUIT)
	select {
	case <-n.exited:
	case <-time.After(d):
	}
}

// Term sends SIGTERM and waits up to d for the exit; it returns how long
// the shutdown took.
func (n *Node) Term(d time.Duration) (time.Duration, error) {
	start := time.Now()
	n.signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		n.mu.Lock()
		err := n.exitErr
		n.mu.Unlock()
		return time.Since(start), err
	case <-time.After(d):
		n.Kill()
		return time.Since(start), errors.New("did not exit after SIGTERM; killed")
	}
}

// Pause (SIGSTOP) freezes the process: its etcd lease expires, the others
// drop it, while its grains stay in memory.
func (n *Node) Pause() { n.signal(syscall.SIGSTOP) }

// Resume (SIGCONT) continues a paused process.
func (n *Node) Resume() { n.signal(syscall.SIGCONT) }

// Partition cuts the node off from the other nodes, etcd and MariaDB
// (nft drop rules in its namespace; Options.Netns): only its own client
// ports still answer. The process keeps running.
func (n *Node) Partition(t testing.TB) {
	t.Helper()
	if n.netns == "" {
		t.Fatal(errNoNetns)
	}
	_, gport, _ := net.SplitHostPort(n.GRPCAddr)
	_, hport, _ := net.SplitHostPort(n.HTTPAddr)
	if err := cut(n.netns, []string{gport, hport}); err != nil {
		t.Fatalf("partition %s: %v", n.ID, err)
	}
}

// Heal lifts the partition.
func (n *Node) Heal(t testing.TB) {
	t.Helper()
	if n.netns == "" {
		t.Fatal(errNoNetns)
	}
	if err := heal(n.netns); err != nil {
		t.Fatalf("heal %s: %v", n.ID, err)
	}
}

// Conn is a gRPC client connection to the node (kept across restarts:
// the address does not change).
func (n *Node) Conn(t testing.TB) *grpc.ClientConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		n.conn = conn
		t.Cleanup(func() { conn.Close() })
	}
	return n.conn
}

// Call is one attempt of a harness client through a node: when it was
// sent, how long it took to be answered, and the answer's code.
type Call struct {
	At   time.Time
	Took time.Duration
	Code codes.Code
	// Reason is the error's code name (ErrorInfo), RetryAfter its
	// RetryInfo delay: "" and 0 when the status has none.
	Reason     string
	RetryAfter time.Duration
}

// noteAnswer records the outcome of a client call to the node sent at
// start: a reply (err nil) with its time, or a retryable error.
func (n *Node) noteAnswer(start time.Time, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, Call{At: start, Took: time.Since(start), Code: status.Code(err), Reason: Reason(err), RetryAfter: RetryDelay(err)})
	switch {
	case err == nil:
		n.answers = append(n.answers, time.Now())
	case Retryable(err):
		n.refused++
	}
}

// Answers counts the replies the harness's clients got from the node in
// [from, to), and the retryable errors over the node's whole life.
func (n *Node) Answers(from, to time.Time) (replies, refused int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, at := range n.answers {
		if !at.Before(from) && at.Before(to) {
			replies++
		}
	}
	return replies, n.refused
}

// Calls returns the attempts sent through the node in [from, to).
func (n *Node) Calls(from, to time.Time) []Call {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []Call
	for _, c := range n.calls {
		if !c.At.Before(from) && c.At.Before(to) {
			out = append(out, c)
		}
	}
	return out
}

// Rooms is the RoomService client of the node.
func (n *Node) Rooms(t testing.TB) v1.RoomServiceClient { return v1.NewRoomServiceClient(n.Conn(t)) }

// Admin is the ClusterAdmin client of the node.
func (n *Node) Admin(t testing.TB) v1.ClusterAdminClient { return v1.NewClusterAdminClient(n.Conn(t)) }

// LogTail returns the last lines of the node's log.
func (n *Node) LogTail(lines int) string {
	f, err := os.Open(n.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var all []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		all = append(all, s.Text())
	}
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// LogContains counts log lines containing s.
func (n *Node) LogContains(s string) int {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// Members asks the node for the members it sees.
func (n *Node) Members(t testing.TB) *v1.ClusterMembersReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := n.Admin(t).Members(ctx, &v1.ClusterMembersRequest{})
	if err != nil {
		t.Fatalf("%s members: %v", n.ID, err)
	}
	return r
}

// LogGrep returns the log lines written at or after since that contain
// any of subs (JSON log lines; the time is read from their "time" key).
func (n *Node) LogGrep(since time.Time, subs ...string) string {
	f, err := os.Open(n.logPath)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		var rec struct {
			Time time.Time `json:"time"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Time.Before(since) {
			continue
		}
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
