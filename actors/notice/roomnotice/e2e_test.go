package roomnotice_test

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"testing"
	"time"

	grainkind "github.com/hyapp/roomcell/cluster/kind"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hyapp/roomcell/actors/notice/noticeapp"
	"github.com/hyapp/roomcell/actors/notice/noticetest"
	"github.com/hyapp/roomcell/actors/notice/roomnotice"
	"github.com/hyapp/roomcell/actors/notice/walletnotice"
	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/supervise"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// End to end: an owner kicks a user over gRPC; the room grain commits
// RoomUserKicked, the room's IM path sends the group system message, and
// the room notice worker sends the kicked user one private C2C
// room_notice with the same event_id. Nobody else gets a notice.
func TestKickOverGRPCReachesKickedUserAndGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fake, pub := noticetest.FakeIM(t)
	roomStore := memdb.New()
	t.Cleanup(func() { _ = roomStore.Close() })

	cfg := configs.Default()
	cfg.Cluster.Port = 0
	m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, NodeID: "e2e",
		Kinds:  []*pcluster.Kind{grainkind.New(roomgrain.Kind, roomgrain.GrainProps(roomgrain.Deps{Store: roomStore, Publisher: pub, Config: cfg.Room, Logger: noticetest.Quiet}))},
		Logger: noticetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(false)

	srv, _ := grpcapi.NewServer(grpcapi.Options{Logger: noticetest.Quiet})
	v1.RegisterRoomServiceServer(srv, grpcapi.NewRoomServer(&roomgrain.Client{Cluster: m.Cluster, AttemptTimeout: 5 * time.Second}, noticetest.Quiet, 10*time.Second))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rooms := v1.NewRoomServiceClient(conn)

	// The node's workers: the outbox relay and the notice role.
	sup, err := supervise.NewSupervisor(m.System, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	r, err := relay.Start(sup, relay.Deps{Store: roomStore, Publisher: pub, NodeID: "e2e", Logger: noticetest.Quiet,
		Config: configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 50 * time.Millisecond, BatchSize: 100, PublishTimeout: 3 * time.Second,
			RetryStrategy: configs.RetryFixedInterval, LeaseTTL: 10 * time.Second})})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(10 * time.Second)
	noticeStore := memdb.NewNoticeStore()
	t.Cleanup(func() { _ = noticeStore.Close() })
	var ncfg configs.NoticeConfig
	ncfg.RoomNoticeWorker = configs.WithDefaults(configs.NoticeWorkerConfig{Enabled: true, PollInterval: 50 * time.Millisecond})
	svc, err := noticeapp.Start(sup, noticeapp.Deps{Config: ncfg, Store: noticeStore, Modules: []noticeapp.Module{walletnotice.App(nil), roomnotice.App(roomStore)}, Publisher: pub,
		NodeID: "e2e", Logger: noticetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop(10 * time.Second)

	must := func(reply *v1.CommandReply, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(rooms.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "lalu", RoomId: "r1", UserId: "owner", Name: "Room"}))
	must(rooms.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: "lalu", RoomId: "r1", UserId: "bob"}))
	must(rooms.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c3", AppCode: "lalu", RoomId: "r1", UserId: "carol"}))
	must(rooms.KickUser(ctx, &v1.KickUserRequest{CommandId: "c4", AppCode: "lalu", RoomId: "r1", UserId: "owner",
		TargetUserId: "bob", BanSeconds: 60, Reason: "spam"}))

	var private []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		msgs := fake.C2CMessages("bob")
		if len(msgs) > 0 {
			private = msgs[0].EventIDs
			if len(msgs) != 1 || msgs[0].Ext != roomnotice.ExtRoomNotice || len(private) != 1 {
				t.Fatalf("bob's private messages %+v, want one room_notice", msgs)
			}
			var k roomnotice.KickNotice
			if err := json.Unmarshal([]byte(msgs[0].Data), &k); err != nil {
				t.Fatal(err)
			}
			if k.EventID != private[0] || k.TargetUserID != "bob" || k.OperatorUserID != "owner" || k.Reason != "spam" ||
				k.RoomID != "r1" || k.AppCode != "lalu" || k.EventType != room.TypeRoomUserKicked || k.BanUntilMs <= k.CreatedAtMs {
				t.Fatalf("room_notice payload %+v", k)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the kicked user got no private notice")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var group []string
	for _, gm := range fake.GroupMessages(roomim.GroupID("lalu", "r1")) {
		group = append(group, gm.EventIDs...)
	}
	if !slices.Contains(group, private[0]) {
		t.Fatalf("room group messages carry %v, not the kick %s", group, private[0])
	}
	if fake.EventIDCounts()[private[0]] != 2 {
		t.Fatalf("the kick reached IM %d times, want 2 (group message + C2C notice)", fake.EventIDCounts()[private[0]])
	}
	// Only the kicked user is notified, once, and the row is delivered.
	time.Sleep(200 * time.Millisecond)
	for _, u := range []string{"owner", "carol"} {
		if n := len(fake.C2CMessages(u)); n != 0 {
			t.Fatalf("%s got %d private messages", u, n)
		}
	}
	if n := len(fake.C2CMessages("bob")); n != 1 {
		t.Fatalf("bob got %d private messages", n)
	}
	row, err := noticeStore.Get(ctx, persistence.NoticeKey{SourceName: persistence.SourceRoomOutbox, AppCode: "lalu", SourceEventID: private[0], Channel: persistence.ChannelIMC2C})
	if err != nil || row.Status != persistence.NoticeDelivered || row.Ingress != persistence.IngressPoll {
		t.Fatalf("delivery row %+v %v", row, err)
	}
}
