package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
)

// startDev starts a whole dev-mode process on loopback ports.
func startDev(t *testing.T, edit func(*configs.Config)) (*App, v1.RoomServiceClient) {
	return startDevB(t, edit)
}

func startDevB(t testing.TB, edit func(*configs.Config)) (*App, v1.RoomServiceClient) {
	t.Helper()
	return startDevHooks(t, edit, testHooks{})
}

// startDevHooks is startDev with a test's hooks in the process.
func startDevHooks(t testing.TB, edit func(*configs.Config), hooks testHooks) (*App, v1.RoomServiceClient) {
	t.Helper()
	cfg, err := loadConfig(flags{dev: true, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodeID = "e2e"
	if edit != nil {
		edit(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	app, err := start(context.Background(), cfg, log, true, hooks)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(app.Shutdown)
	conn, err := grpc.NewClient(app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return app, v1.NewRoomServiceClient(conn)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, err error, code codes.Code, what string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
}

func TestEndToEndTourOverGRPC(t *testing.T) {
	app, rc := startDev(t, nil)
	ctx := ctxT(t)
	const app1, r = "demo", "room-1"

	created, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: app1, RoomId: r, UserId: "alice", Name: "Alice's room", MicSeats: 4})
	if err != nil {
		t.Fatal(err)
	}
	if created.RoomSeq != 1 || created.Room.OwnerUserId != "alice" || len(created.Room.Seats) != 4 || len(created.EventIds) != 2 {
		t.Fatalf("create reply %+v", created)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: app1, RoomId: r, UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	wc := walletClient(t, app)
	if _, err := wc.Credit(ctx, &v1.WalletCreditRequest{CommandId: "topup-1", AppCode: app1, UserId: "alice", AssetType: "COIN", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: "c3", AppCode: app1, RoomId: r, UserId: "bob", Seat: 2}); err != nil {
		t.Fatal(err)
	}
	g, err := rc.SendGift(ctx, &v1.SendGiftRequest{CommandId: "c4", AppCode: app1, RoomId: r, UserId: "alice", ToUserId: "bob", GiftId: "rose", GiftCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	if g.Room.Heat != 30 {
		t.Fatalf("heat after 3 roses: %d, want 30", g.Room.Heat)
	}
	bal, err := wc.GetBalances(ctx, &v1.WalletGetBalancesRequest{AppCode: app1, UserId: "alice"})
	if err != nil || coin(bal) != 70 {
		t.Fatalf("alice after 3 roses at 10: %v %v, want 70 COIN", bal, err)
	}
	// Not enough coins: the room and the wallet stay as they are.
	_, err = rc.SendGift(ctx, &v1.SendGiftRequest{CommandId: "c4b", AppCode: app1, RoomId: r, UserId: "alice", ToUserId: "bob", GiftId: "heart", GiftCount: 1})
	wantCode(t, err, codes.FailedPrecondition, "gift without funds")
	if after, _ := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: app1, RoomId: r}); after.Room.Heat != 30 || after.Room.Seq != g.RoomSeq {
		t.Fatalf("room changed by refused gift: %+v", after.Room)
	}
	if bal, _ := wc.GetBalances(ctx, &v1.WalletGetBalancesRequest{AppCode: app1, UserId: "alice"}); coin(bal) != 70 {
		t.Fatalf("wallet changed by refused gift: %v", bal)
	}
	// A retried command answers from the log.
	g2, err := rc.SendGift(ctx, &v1.SendGiftRequest{CommandId: "c4", AppCode: app1, RoomId: r, UserId: "alice", ToUserId: "bob", GiftId: "rose", GiftCount: 3})
	if err != nil || !g2.Duplicate || g2.RoomSeq != g.RoomSeq {
		t.Fatalf("retried gift: %+v %v", g2, err)
	}
	k, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "c5", AppCode: app1, RoomId: r, UserId: "alice", TargetUserId: "bob", BanSeconds: 60, Reason: "spam"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Room.MemberCount != 1 || k.Room.Seats[2].UserId != "" {
		t.Fatalf("after kick: %+v", k.Room)
	}
	_, err = rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c6", AppCode: app1, RoomId: r, UserId: "bob"})
	wantCode(t, err, codes.FailedPrecondition, "banned user joins")
	_, err = rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "c7", AppCode: app1, RoomId: r, UserId: "mallory", TargetUserId: "alice"})
	wantCode(t, err, codes.PermissionDenied, "non-owner kicks")
	_, err = rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c8", AppCode: app1, RoomId: r, UserId: "x", Name: "again"})
	wantCode(t, err, codes.AlreadyExists, "create twice")
	got, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: app1, RoomId: r})
	if err != nil || got.Room.Seq != 5 || got.Room.Heat != 30 {
		t.Fatalf("get: %+v %v", got, err)
	}
	_, err = rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: app1, RoomId: "nope"})
	wantCode(t, err, codes.NotFound, "unknown room")
	if _, err := rc.CloseRoom(ctx, &v1.CloseRoomRequest{CommandId: "c9", AppCode: app1, RoomId: r, UserId: "alice"}); err != nil {
		t.Fatal(err)
	}
	_, err = rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c10", AppCode: app1, RoomId: r, UserId: "carol"})
	wantCode(t, err, codes.FailedPrecondition, "join closed room")

	// Every event of the tour is in the outbox.
	rows, err := app.store.ListOutbox(ctx, outboxAll())
	if err != nil || len(rows) < 8 {
		t.Fatalf("outbox rows %d err %v", len(rows), err)
	}
}

func TestEndToEndBadInputChangesNothing(t *testing.T) {
	app, rc := startDev(t, nil)
	ctx := ctxT(t)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "owner", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: "a", RoomId: "r", UserId: "bob"}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 5000)
	bad := []struct {
		name string
		call func() error
	}{
		{"empty command_id", func() error {
			_, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{AppCode: "a", RoomId: "r", UserId: "u"})
			return err
		}},
		{"empty room_id", func() error {
			_, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "x1", AppCode: "a", UserId: "u"})
			return err
		}},
		{"oversized name", func() error {
			_, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "x2", AppCode: "a", RoomId: "r2", UserId: "u", Name: long})
			return err
		}},
		{"oversized user id", func() error {
			_, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "x3", AppCode: "a", RoomId: "r", UserId: long})
			return err
		}},
		{"unknown asset credit", func() error {
			_, err := walletClient(t, app).Credit(ctx, &v1.WalletCreditRequest{CommandId: "w1", AppCode: "a", UserId: "u", AssetType: "GOLD", Amount: 5})
			return err
		}},
		{"negative gift count", func() error {
			_, err := rc.SendGift(ctx, &v1.SendGiftRequest{CommandId: "x4", AppCode: "a", RoomId: "r", UserId: "owner", ToUserId: "bob", GiftId: "rose", GiftCount: -1})
			return err
		}},
		{"unknown gift", func() error {
			_, err := rc.SendGift(ctx, &v1.SendGiftRequest{CommandId: "x5", AppCode: "a", RoomId: "r", UserId: "owner", ToUserId: "bob", GiftId: "nope", GiftCount: 1})
			return err
		}},
		{"negative ban", func() error {
			_, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "x6", AppCode: "a", RoomId: "r", UserId: "owner", TargetUserId: "bob", BanSeconds: -5})
			return err
		}},
		{"too many seats", func() error {
			_, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "x7", AppCode: "a", RoomId: "r3", UserId: "u", Name: "n", MicSeats: 21})
			return err
		}},
		{"seat out of range", func() error {
			_, err := rc.TakeMic(ctx, &v1.TakeMicRequest{CommandId: "x8", AppCode: "a", RoomId: "r", UserId: "bob", Seat: 15})
			return err
		}},
	}
	for _, b := range bad {
		wantCode(t, b.call(), codes.InvalidArgument, b.name)
	}
	_, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "x9", AppCode: "a", RoomId: "ghost", UserId: "u"})
	wantCode(t, err, codes.NotFound, "unknown room")

	got, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: "a", RoomId: "r"})
	if err != nil || got.Room.Seq != 2 || got.Room.Heat != 0 {
		t.Fatalf("room changed by bad input: %+v %v", got, err)
	}
	rows, _ := app.store.ListOutbox(ctx, outboxAll())
	if len(rows) != 3 {
		t.Fatalf("outbox has %d rows after bad input, want 3 (RoomCreated, 2× RoomUserJoined)", len(rows))
	}
}

func TestOpsEndpointsAndDrain(t *testing.T) {
	app, _ := startDev(t, nil)
	get := func(path string) (int, string) { return opsGet(t, app, path) }
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("/readyz %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics %d", code)
	}
	conn, err := grpc.NewClient(app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	if r, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("grpc health %v %v", r, err)
	}
	app.draining.Store(true)
	if code, _ := get("/readyz"); code != 503 {
		t.Fatalf("/readyz while draining: %d, want 503", code)
	}
}
