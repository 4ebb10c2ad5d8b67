package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/grpcapi"
)

// clusterView is a two-member cluster, b partly unreachable on demand.
type clusterView struct{ owners [2]string }

func (clusterView) NodeID() string   { return "a" }
func (clusterView) Provider() string { return "etcd" }
func (v clusterView) Survey(_ context.Context, kind, identity string) []cluster.PeerReport {
	view := []string{"10.0.0.1:7000", "10.0.0.2:7000"}
	rep := func(node, addr, owner string, rooms int32) *roomcellv1.MemberReport {
		return &roomcellv1.MemberReport{MemberId: "m-" + node, NodeId: node, Address: addr, Status: cluster.StatusServing,
			Activations: map[string]int32{"room": rooms}, MemberAddresses: view, OwnerAddress: owner}
	}
	return []cluster.PeerReport{
		{Address: view[0], Self: true, Report: rep("a", view[0], v.owners[0], 7)},
		{Address: view[1], Report: rep("b", view[1], v.owners[1], 5)},
	}
}

func startClusterTestServer(t *testing.T, v grpcapi.ClusterView) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	roomcellv1.RegisterClusterAdminServer(srv, grpcapi.NewClusterAdminServer(v))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func TestRoomctlClusterMembers(t *testing.T) {
	addr := startClusterTestServer(t, clusterView{})
	code, out, errOut := outboxCtl(t, addr, "cluster", "members")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"provider etcd", "members 2", "views agree yes", "NODE", "ROOMS", "a*", "10.0.0.2:7000", "m-b"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	var bLine []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "b ") {
			bLine = strings.Fields(l)
		}
	}
	if len(bLine) < 5 || bLine[2] != "serving" || bLine[3] != "5" || bLine[4] != "2" {
		t.Fatalf("b line %v, want status serving, 5 rooms, sees 2", bLine)
	}
	code, out, _ = outboxCtl(t, addr, "--json", "cluster", "members")
	var r struct {
		Members []struct {
			NodeID string `json:"node_id"`
			Rooms  int    `json:"rooms"`
		} `json:"members"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Members) != 2 || r.Members[0].Rooms != 7 {
		t.Fatalf("--json: exit %d %q", code, out)
	}
}

func TestRoomctlRoomWhere(t *testing.T) {
	addr := startClusterTestServer(t, clusterView{owners: [2]string{"10.0.0.2:7000", "10.0.0.2:7000"}})
	for _, args := range [][]string{{"room", "where", "app/r1"}, {"room", "where", "--app", "app", "r1"}} {
		code, out, errOut := outboxCtl(t, addr, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if !strings.Contains(out, "room app/r1  owner b at 10.0.0.2:7000  member m-b") || !strings.Contains(out, "agrees") {
			t.Fatalf("%v output:\n%s", args, out)
		}
	}
	addr = startClusterTestServer(t, clusterView{owners: [2]string{"10.0.0.2:7000", "10.0.0.1:7000"}})
	_, out, _ := outboxCtl(t, addr, "room", "where", "app/r1")
	if !strings.Contains(out, "DISAGREE") || !strings.Contains(out, "owner 10.0.0.1:7000") {
		t.Fatalf("disagreeing views not shown:\n%s", out)
	}
	if code, _, errOut := outboxCtl(t, addr, "room", "where", "r1"); code != 2 || !strings.Contains(errOut, "--app") {
		t.Fatalf("missing app: exit %d %q", code, errOut)
	}
}
