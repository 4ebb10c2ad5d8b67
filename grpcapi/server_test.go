package grpcapi

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/internal/logtest"
)

// fakeBackend records every command it gets and answers with reply (or a
// fixed CommandReply when reply is nil).
type fakeBackend struct {
	mu    sync.Mutex
	got   []*roomcellv1.RoomCommand
	reply func(ctx context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error)
}

func (f *fakeBackend) Execute(ctx context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	f.mu.Lock()
	f.got = append(f.got, proto.Clone(cmd).(*roomcellv1.RoomCommand))
	reply := f.reply
	f.mu.Unlock()
	if reply != nil {
		return reply(ctx, cmd)
	}
	return cannedReply(), nil
}

func (f *fakeBackend) calls() []*roomcellv1.RoomCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*roomcellv1.RoomCommand(nil), f.got...)
}

func cannedReply() *roomcellv1.CommandReply {
	return &roomcellv1.CommandReply{
		RoomSeq:  7,
		EventIds: []string{"app1:r1:7:0", "app1:r1:7:1"},
		Room: &roomcellv1.RoomView{
			AppCode: "app1", RoomId: "r1", OwnerUserId: "u1", Name: "Lobby", Status: "open", Seq: 7,
			Members: []string{"u1", "u2"},
			Seats:   []*roomcellv1.Seat{{Seat: 0, UserId: "u1"}, {Seat: 1}},
			Heat:    42,
		},
		JoinRights: &roomcellv1.JoinRights{SendAudio: true, Seat: 0},
	}
}

// syncBuffer is a log sink the logging goroutines write while the test reads.
type syncBuffer = logtest.Buffer

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startServer serves a RoomServer over b on an in-memory listener.
func startServer(t *testing.T, o Options, b RoomBackend) *grpc.ClientConn {
	t.Helper()
	if o.Logger == nil {
		o.Logger = discardLogger()
	}
	return serveRoomServer(t, o, NewRoomServer(b, o.Logger, 0))
}

// serveRoomServer serves rs on an in-memory listener.
func serveRoomServer(t *testing.T, o Options, rs *RoomServer) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv, _ := NewServer(o)
	roomcellv1.RegisterRoomServiceServer(srv, rs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestHealthAndReflection(t *testing.T) {
	conn := startServer(t, Options{}, &fakeBackend{})
	ctx := testCtx(t)

	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	if hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health status %v, want SERVING", hc.GetStatus())
	}

	services := listServices(t, ctx, conn)
	for _, want := range []string{"roomcell.v1.RoomService", "grpc.health.v1.Health"} {
		if !strings.Contains(services, want) {
			t.Errorf("reflection lists %q, missing %s", services, want)
		}
	}
}

func listServices(t *testing.T, ctx context.Context, conn *grpc.ClientConn) string {
	t.Helper()
	st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	if err := st.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatalf("reflection send: %v", err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatalf("reflection recv: %v", err)
	}
	_ = st.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return strings.Join(names, ",")
}

func TestHealthDrain(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv, hs := NewServer(Options{Logger: discardLogger()})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hc, err := healthpb.NewHealthClient(conn).Check(testCtx(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if hc.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("status %v after drain, want NOT_SERVING", hc.GetStatus())
	}
}

func TestMaxMessageSize(t *testing.T) {
	b := &fakeBackend{}
	conn := startServer(t, Options{MaxMsgBytes: 256}, b)
	req := validCreate()
	req.Name = strings.Repeat("n", 120)
	for range 10 {
		req.AdminUserIds = append(req.AdminUserIds, strings.Repeat("a", 40))
	}
	_, err := roomcellv1.NewRoomServiceClient(conn).CreateRoom(testCtx(t), req)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized message: %v, want ResourceExhausted", err)
	}
	if n := len(b.calls()); n != 0 {
		t.Fatalf("backend called %d times for an oversized message", n)
	}
}

func newTextLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
