package roomgrain

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	grainkind "github.com/hyapp/roomcell/cluster/kind"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// appendFaults fails appends on demand: with a store outage, or with
// another owner's CreateRoom of the same room stored first (a conflict).
type appendFaults struct {
	*memdb.Store
	down  atomic.Bool
	rival atomic.Bool
}

func (s *appendFaults) Append(ctx context.Context, a persistence.Append) error {
	if s.down.Load() {
		// A slow outage: the group step beside it has answered by then.
		time.Sleep(50 * time.Millisecond)
		return persistence.ErrUnavailable
	}
	if s.rival.Load() && a.Command.Seq == 1 {
		rival := a
		rival.Lease = nil
		rival.Command.CommandID = "rival"
		if err := s.Store.Append(ctx, rival); err != nil {
			return err
		}
	}
	return s.Store.Append(ctx, a)
}

func startGroupNode(t *testing.T, store Store) (*Client, *imfake.Server) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	client, err := tencentim.New(fake.ClientConfig(), tencentim.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	im := roomim.New(client, roomim.WithLogger(quiet))
	t.Cleanup(im.Close)
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	deps := Deps{Store: store, Publisher: im, Gifts: fixedHeat(1), Config: cfg.Room}
	m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(Kind, GrainProps(deps))}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(false) })
	if err := client.EnsureAccount(context.Background(), "owner"); err != nil {
		t.Fatal(err)
	}
	return &Client{Cluster: m.Cluster, AttemptTimeout: 5 * time.Second}, fake
}

func createRoom(c *Client, roomID string) (*v1.CommandReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
		CommandId: "create", AppCode: "app", RoomId: roomID, UserId: "owner", Name: "n"}}})
}

// TestCreateRoomGroupBesideTheAppend: CreateRoom's IM group is made
// beside the room's append. When the append fails (a store outage), the
// group made meanwhile is destroyed and the caller told to retry; the
// retry stores the room and makes the group again (ready in the reply,
// there in IM). When the append meets another owner's CreateRoom (a
// conflict: the room exists), the group stays: the room wants it.
func TestCreateRoomGroupBesideTheAppend(t *testing.T) {
	store := &appendFaults{Store: memdb.New()}
	c, fake := startGroupNode(t, store)
	gid := roomim.GroupID("app", "r1")

	store.down.Store(true)
	if _, err := createRoom(c, "r1"); !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("create with the store down: %v, want unavailable", err)
	}
	if fake.CallCount(tencentim.APICreateGroup) != 1 || fake.CallCount(tencentim.APIDestroyGroup) != 1 {
		t.Fatalf("create_group %d, destroy_group %d calls; want the group made beside the append and taken back",
			fake.CallCount(tencentim.APICreateGroup), fake.CallCount(tencentim.APIDestroyGroup))
	}
	if _, ok := fake.Group(gid); ok {
		t.Fatal("a group is left for a room that was not stored")
	}

	store.down.Store(false)
	reply, err := createRoom(c, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fake.Group(gid); !reply.ImGroupReady || !ok || reply.RoomSeq != 1 {
		t.Fatalf("retry: seq %d, im_group_ready %v, group exists %v; want seq 1 and both", reply.RoomSeq, reply.ImGroupReady, ok)
	}

	store.rival.Store(true)
	if _, err := createRoom(c, "r2"); !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("create meeting another owner's: %v, want unavailable (retry)", err)
	}
	if _, ok := fake.Group(roomim.GroupID("app", "r2")); !ok {
		t.Fatal("the group of a room that exists was taken back")
	}
	got, err := c.Execute(context.Background(), &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r2"}}})
	if err != nil || got.RoomSeq != 1 {
		t.Fatalf("the rival's room: %+v %v", got, err)
	}
}
