package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	grainkind "github.com/hyapp/roomcell/cluster/kind"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/ownership"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// node is one in-process member with its room client.
type node struct {
	id     string
	m      *cluster.Member
	client *roomgrain.Client
	reg    *prometheus.Registry
}

type memberOpts struct {
	cfg   configs.ClusterConfig
	store *memdb.Store
	agent *test.InMemAgent
	log   *slog.Logger
	// leases: room ownership by shard leases (cluster.NewOwnership), as
	// roomcell wires it; otherwise shards follow the member view.
	leases bool
	// meters: an OTel provider exporting to the node's registry, as
	// roomcell wires it.
	meters bool
	// idle overrides the rooms' idle timeout (passivation).
	idle time.Duration
}

func startNode(t *testing.T, id string, o memberOpts) *node {
	t.Helper()
	deps := roomgrain.Deps{Store: o.store, Gifts: roomgrain.FreeGifts(1), Config: configs.Default().Room}
	if o.idle > 0 {
		deps.Config.IdleTimeout = o.idle
	}
	reg := prometheus.NewRegistry()
	if o.log == nil {
		o.log = testLogger(t, id)
	}
	var owners ownership.Table
	if o.leases {
		var err error
		if owners, err = cluster.NewOwnership(o.cfg, id, true, o.log); err != nil {
			t.Fatal(err)
		}
		deps.Lease = owners
	}
	var meters metric.MeterProvider
	if o.meters {
		exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			t.Fatal(err)
		}
		meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	}
	m, err := cluster.Start(cluster.Options{Config: o.cfg, NodeID: id, Kinds: []*pcluster.Kind{grainkind.New(roomgrain.Kind, roomgrain.GrainProps(deps))},
		Logger: o.log, Registerer: reg, Agent: o.agent, Ownership: owners, MeterProvider: meters})
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	// Every member stops when its test ends (Stop runs once, so a test
	// that stops it itself is unaffected). A member left running kept its
	// gRPC server goroutine, whose reads of grpclog's global logger raced
	// with the next member's Remote.Start writing it (failed make test).
	t.Cleanup(func() { m.Stop(false) })
	client := &roomgrain.Client{Cluster: m.Cluster, AttemptTimeout: 2 * time.Second}
	if owners != nil {
		client.Owners = owners
	}
	return &node{id: id, m: m, client: client, reg: reg}
}

func waitReady(t *testing.T, ns ...*node) {
	t.Helper()
	for _, n := range ns {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := n.m.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", n.id, err)
		}
	}
}

// testLogger logs warnings and up to the test log when -v, so a failing
// run shows membership changes; silent otherwise.
func testLogger(t *testing.T, id string) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", id)
}

// freePort asks the kernel for a loopback port nobody listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func etcdEndpoint() string {
	if e := os.Getenv("ROOMCELL_TEST_ETCD"); e != "" {
		return e
	}
	return "127.0.0.1:23790"
}

// etcdConfig is an etcd-provider config under a base key no other test
// uses.
func etcdConfig(t *testing.T) configs.ClusterConfig {
	cfg := configs.Default().Cluster
	cfg.Provider = configs.ProviderEtcd
	cfg.Host, cfg.Port = "127.0.0.1", 0
	cfg.EtcdEndpoints = []string{etcdEndpoint()}
	cfg.EtcdBaseKey = fmt.Sprintf("/roomcell-test/%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	cfg.RequestTimeout = 2 * time.Second
	cfg.DrainTimeout = 5 * time.Second
	return cfg
}

func create(appRoom string) *v1.RoomCommand {
	app, r, _ := strings.Cut(appRoom, "/")
	return &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
		CommandId: "create-" + r, AppCode: app, RoomId: r, UserId: "owner", Name: r}}}
}

func join(appRoom, user, commandID string) *v1.RoomCommand {
	app, r, _ := strings.Cut(appRoom, "/")
	return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
		CommandId: commandID, AppCode: app, RoomId: r, UserId: user}}}
}

func get(appRoom string) *v1.RoomCommand {
	app, r, _ := strings.Cut(appRoom, "/")
	return &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: app, RoomId: r}}}
}

func exec(t *testing.T, n *node, rc *v1.RoomCommand) *v1.CommandReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := n.client.Execute(ctx, rc)
	if err != nil {
		t.Fatalf("through %s: %v", n.id, err)
	}
	return r
}

// metricValue reads one gauge or counter sample from the node's registry;
// labels are name, value pairs the sample must carry.
func metricValue(t *testing.T, n *node, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no sample %s %v", name, labels)
	return 0
}

func keyOf(appRoom string) persistence.RoomKey {
	app, r, _ := strings.Cut(appRoom, "/")
	return persistence.RoomKey{AppCode: app, RoomID: r}
}

// freePortListener returns a loopback port held by a listener until the
// test ends.
func freePortListener(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}
