//go:build !race

// Two cluster members in one process trip a data race inside Proto.Actor
// itself (remote.Start sets the process-global grpclog while the first
// member's gRPC goroutines read it; shared/guides/protoactor.md §5), so
// this file is built only without -race. `make test` runs it in a second,
// race-free pass.

package roomgrain

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	grainkind "github.com/hyapp/roomcell/cluster/kind"

	"github.com/hyapp/roomcell/room"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence/memdb"
)

func TestMultiMemberCommandsReachRoomsOnTheOtherMember(t *testing.T) {
	store := memdb.New() // shared, as MySQL is between real nodes
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	a, b := twoMembers(t, cfg, Deps{Store: store, Gifts: fixedHeat(5), Config: cfg.Room})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ca := &Client{Cluster: a.Cluster, AttemptTimeout: 3 * time.Second}
	const rooms = 20
	for i := range rooms {
		roomID := fmt.Sprintf("r%d", i)
		for j, rc := range []*v1.RoomCommand{
			{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{CommandId: "c1", AppCode: "app", RoomId: roomID, UserId: "owner", Name: "n"}}},
			{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{CommandId: "c2", AppCode: "app", RoomId: roomID, UserId: "bob"}}},
			{Command: &v1.RoomCommand_SendGift{SendGift: &v1.SendGiftRequest{CommandId: "c3", AppCode: "app", RoomId: roomID, UserId: "owner", ToUserId: "bob", GiftId: "rose", GiftCount: 2}}},
		} {
			r, err := ca.Execute(ctx, rc)
			if err != nil {
				t.Fatalf("room %s command %d through member a: %v", roomID, j, err)
			}
			if r.RoomSeq != int64(j+1) {
				t.Fatalf("room %s command %d: seq %d", roomID, j, r.RoomSeq)
			}
		}
		// A rule error crosses members as its own sentinel.
		_, err := ca.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_KickUser{KickUser: &v1.KickUserRequest{
			CommandId: "c4", AppCode: "app", RoomId: roomID, UserId: "bob", TargetUserId: "owner"}}})
		if err != room.ErrNotOwner {
			t.Fatalf("room %s: kick by non-owner through member a: %v, want ErrNotOwner", roomID, err)
		}
	}
	onA := a.Cluster.GetClusterKind(Kind).Count()
	onB := b.Cluster.GetClusterKind(Kind).Count()
	if onB == 0 || onA+onB != rooms {
		t.Fatalf("rooms on a=%d b=%d; want some on b (remote) and %d in all", onA, onB, rooms)
	}
	t.Logf("rooms placed: %d on the calling member, %d on the other", onA, onB)
	// Reads through the other member see the same rooms.
	cb := &Client{Cluster: b.Cluster, AttemptTimeout: 3 * time.Second}
	for i := range rooms {
		r, err := cb.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: fmt.Sprintf("r%d", i)}}})
		if err != nil || r.Room.Heat != 10 || len(r.Room.Members) != 2 {
			t.Fatalf("get r%d through member b: %+v %v", i, r, err)
		}
	}
}

// twoMembers starts two cluster members on one in-memory agent, each with
// the room kind built from deps, and waits until each sees the other.
// They stop when the test ends.
func twoMembers(t *testing.T, cfg configs.Config, deps Deps) (a, b *cluster.Member) {
	t.Helper()
	agent := test.NewInMemAgent()
	start := func(name string) *cluster.Member {
		m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(Kind, GrainProps(deps))}, Agent: agent,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		return m
	}
	a = start("a")
	t.Cleanup(func() { a.Stop(true) })
	b = start("b")
	t.Cleanup(func() { b.Stop(true) })
	deadline := time.Now().Add(30 * time.Second)
	for a.Cluster.MemberList.Length() < 2 || b.Cluster.MemberList.Length() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("members did not see each other")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return a, b
}
