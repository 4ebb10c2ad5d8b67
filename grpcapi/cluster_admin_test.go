package grpcapi_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	grainkind "github.com/hyapp/roomcell/cluster/kind"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// fakeView answers surveys from a fixed list, recording the last probe.
type fakeView struct {
	reports      []cluster.PeerReport
	kind, ident  string
	nodeID, prov string
}

func (f *fakeView) NodeID() string   { return f.nodeID }
func (f *fakeView) Provider() string { return f.prov }
func (f *fakeView) Survey(_ context.Context, kind, identity string) []cluster.PeerReport {
	f.kind, f.ident = kind, identity
	return f.reports
}

func report(node, addr, owner string, rooms int32, view ...string) *roomcellv1.MemberReport {
	return &roomcellv1.MemberReport{MemberId: "id-" + node, NodeId: node, Address: addr, Status: cluster.StatusServing,
		Activations: map[string]int32{roomgrain.Kind: rooms}, MemberAddresses: view, OwnerAddress: owner, Rejoins: 1}
}

func serveClusterAdmin(t *testing.T, view grpcapi.ClusterView) roomcellv1.ClusterAdminClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := grpcapi.NewServer(grpcapi.Options{})
	roomcellv1.RegisterClusterAdminServer(srv, grpcapi.NewClusterAdminServer(view))
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return roomcellv1.NewClusterAdminClient(conn)
}

func TestClusterAdminMembersReportsEveryMemberAndDisagreement(t *testing.T) {
	view := &fakeView{nodeID: "a", prov: "etcd", reports: []cluster.PeerReport{
		{Address: "10.0.0.1:7000", Self: true, Report: report("a", "10.0.0.1:7000", "", 12, "10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000")},
		{Address: "10.0.0.2:7000", Report: report("b", "10.0.0.2:7000", "", 9, "10.0.0.1:7000", "10.0.0.2:7000")},
		{Address: "10.0.0.3:7000", Err: errors.Join(cluster.ErrNoAnswer, errors.New("future: timeout"))},
	}}
	c := serveClusterAdmin(t, view)
	r, err := c.Members(context.Background(), &roomcellv1.ClusterMembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetNodeId() != "a" || r.GetProvider() != "etcd" || len(r.GetMembers()) != 3 {
		t.Fatalf("reply %+v", r)
	}
	a, b, dead := r.GetMembers()[0], r.GetMembers()[1], r.GetMembers()[2]
	if !a.GetAnsweredHere() || a.GetRooms() != 12 || a.GetMembersSeen() != 3 || a.GetNodeId() != "a" || a.GetMemberId() != "id-a" ||
		a.GetStatus() != cluster.StatusServing || a.GetRejoins() != 1 {
		t.Fatalf("self entry %+v", a)
	}
	if b.GetAnsweredHere() || b.GetRooms() != 9 || b.GetMembersSeen() != 2 {
		t.Fatalf("peer entry %+v", b)
	}
	if dead.GetStatus() != grpcapi.StatusUnreachable || dead.GetError() == "" || dead.GetAddress() != "10.0.0.3:7000" {
		t.Fatalf("unreachable entry %+v", dead)
	}
	if r.GetViewsAgree() {
		t.Fatal("a sees 3 members and b 2, yet views_agree")
	}
	view.reports[1].Report.MemberAddresses = view.reports[0].Report.MemberAddresses
	if r, _ := c.Members(context.Background(), &roomcellv1.ClusterMembersRequest{}); !r.GetViewsAgree() {
		t.Fatal("same views, views_agree false")
	}
}

func TestClusterAdminWhereIsRoom(t *testing.T) {
	view := &fakeView{nodeID: "a", reports: []cluster.PeerReport{
		{Address: "10.0.0.1:7000", Self: true, Report: report("a", "10.0.0.1:7000", "10.0.0.2:7000", 1)},
		{Address: "10.0.0.2:7000", Report: report("b", "10.0.0.2:7000", "10.0.0.2:7000", 1)},
	}}
	c := serveClusterAdmin(t, view)
	ctx := context.Background()
	r, err := c.WhereIsRoom(ctx, &roomcellv1.WhereIsRoomRequest{AppCode: "app", RoomId: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if view.kind != roomgrain.Kind || view.ident != "app/r1" {
		t.Fatalf("probe asked about %s %s", view.kind, view.ident)
	}
	if r.GetOwnerAddress() != "10.0.0.2:7000" || r.GetOwnerNodeId() != "b" || r.GetOwnerMemberId() != "id-b" || !r.GetSettled() || len(r.GetViews()) != 2 {
		t.Fatalf("reply %+v", r)
	}
	view.reports[1].Report.OwnerAddress = "10.0.0.1:7000"
	if r, _ := c.WhereIsRoom(ctx, &roomcellv1.WhereIsRoomRequest{AppCode: "app", RoomId: "r1"}); r.GetSettled() {
		t.Fatalf("views differ, settled: %+v", r)
	}
	if _, err := c.WhereIsRoom(ctx, &roomcellv1.WhereIsRoomRequest{AppCode: "app"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty room_id: %v", err)
	}
	view.reports = []cluster.PeerReport{{Address: "10.0.0.1:7000", Self: true, Report: report("a", "10.0.0.1:7000", "", 0)}}
	if _, err := c.WhereIsRoom(ctx, &roomcellv1.WhereIsRoomRequest{AppCode: "app", RoomId: "r1"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("no owner: %v", err)
	}
}

// The real member behind the API: a one-member cluster answers both RPCs
// about itself.
func TestClusterAdminOverRealMember(t *testing.T) {
	cfg := configs.Default().Cluster
	cfg.Port = 0
	kind := grainkind.New(roomgrain.Kind, roomgrain.GrainProps(roomgrain.Deps{Store: memdb.New(), Config: configs.Default().Room}))
	m, err := cluster.Start(cluster.Options{Config: cfg, NodeID: "solo", Kinds: []*pcluster.Kind{kind}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c := serveClusterAdmin(t, m)
	r, err := c.Members(ctx, &roomcellv1.ClusterMembersRequest{})
	if err != nil || len(r.GetMembers()) != 1 || r.GetMembers()[0].GetNodeId() != "solo" || r.GetMembers()[0].GetAddress() != m.Address() ||
		r.GetMembers()[0].GetStatus() != cluster.StatusServing || r.GetProvider() != configs.ProviderSingle {
		t.Fatalf("members %+v %v", r, err)
	}
	w, err := c.WhereIsRoom(ctx, &roomcellv1.WhereIsRoomRequest{AppCode: "app", RoomId: "r1"})
	if err != nil || w.GetOwnerAddress() != m.Address() || w.GetOwnerNodeId() != "solo" || !w.GetSettled() {
		t.Fatalf("where %+v %v", w, err)
	}
}
