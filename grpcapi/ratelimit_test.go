package grpcapi

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/ratelimit"
)

func limitedClient(t *testing.T, b RoomBackend, l *ratelimit.Limiter) roomcellv1.RoomServiceClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv, _ := NewServer(Options{Logger: discardLogger()})
	rs := NewRoomServer(b, discardLogger(), 0)
	rs.SetLimiter(l)
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
	return roomcellv1.NewRoomServiceClient(conn)
}

// A client joining at ten times its limit gets RESOURCE_EXHAUSTED with
// the code RATE_LIMITED and a RetryInfo, and its refused calls never
// reach a room; the other users of the app, at their pace, all pass.
func TestRateLimitOverGRPC(t *testing.T) {
	cfg := configs.DefaultRateLimits()
	cfg.Enabled = true
	cfg.Join = configs.RateClassConfig{UserPerSecond: 20, UserBurst: 5, AppPerSecond: 1000, AppBurst: 1000}
	b := &fakeBackend{}
	// The limiter's clock moves 5 ms a call: 200 calls a second of it,
	// however fast the machine runs the test.
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	c := limitedClient(t, b, ratelimit.New(cfg).WithClock(func() time.Time { return time.Unix(0, now.Load()) }))
	ctx := testCtx(t)
	join := func(user string, i int) error {
		_, err := c.JoinRoom(ctx, &roomcellv1.JoinRoomRequest{CommandId: fmt.Sprintf("%s-%d", user, i), AppCode: "app1", RoomId: "r1", UserId: user})
		return err
	}
	// 2 s at 200 calls a second (10 × 20/s); four others at 10/s each.
	const calls = 400
	var heavyOK, refused int
	var retry *errdetails.RetryInfo
	for i := range calls {
		now.Add(int64(5 * time.Millisecond))
		err := join("heavy", i)
		switch status.Code(err) {
		case codes.OK:
			heavyOK++
		case codes.ResourceExhausted:
			refused++
			st := status.Convert(err)
			if codeOf(st) != errclass.CodeRateLimited {
				t.Fatalf("refusal without RATE_LIMITED: %v", st.Details())
			}
			for _, d := range st.Details() {
				if r, ok := d.(*errdetails.RetryInfo); ok {
					retry = r
				}
			}
			if retry == nil || retry.GetRetryDelay().AsDuration() <= 0 || retry.GetRetryDelay().AsDuration() > 50*time.Millisecond {
				t.Fatalf("refusal's RetryInfo %v: want a delay up to one token (50ms)", retry)
			}
		default:
			t.Fatalf("heavy join %d: %v", i, err)
		}
		if i%20 == 0 {
			for u := range 4 {
				if err := join(fmt.Sprintf("calm%d", u), i); err != nil {
					t.Fatalf("calm user %d refused while another user is limited: %v", u, err)
				}
			}
		}
	}
	if max := 20*2 + 5; heavyOK > max || heavyOK < 40 {
		t.Fatalf("heavy client got %d joins through in 2 s, want 40..%d (rate × time + burst)", heavyOK, max)
	}
	if refused != calls-heavyOK {
		t.Fatalf("heavy client: %d through, %d refused of %d", heavyOK, refused, calls)
	}
	heavyAtBackend := 0
	for _, rc := range b.calls() {
		if rc.GetJoinRoom().GetUserId() == "heavy" {
			heavyAtBackend++
		}
	}
	if heavyAtBackend != heavyOK {
		t.Fatalf("backend saw %d of the heavy client's joins, %d were answered OK: a refused call reached a room", heavyAtBackend, heavyOK)
	}
	t.Logf("2 s at 10x: %d joins through, %d refused (last RetryInfo %v); calm users never refused", heavyOK, refused, retry.GetRetryDelay().AsDuration())
}

// ListRooms (a scan of the directory) passes the app's command bucket.
func TestRateLimitListRooms(t *testing.T) {
	cfg := configs.DefaultRateLimits()
	cfg.Enabled = true
	cfg.Command = configs.RateClassConfig{UserPerSecond: 1, UserBurst: 1, AppPerSecond: 1, AppBurst: 3}
	var now atomic.Int64
	lis := bufconn.Listen(1 << 20)
	srv, _ := NewServer(Options{Logger: discardLogger()})
	rs := NewRoomServer(&fakeBackend{}, discardLogger(), 0)
	rs.SetDirectory(seededDirectory(t))
	rs.SetLimiter(ratelimit.New(cfg).WithClock(func() time.Time { return time.Unix(0, now.Load()) }))
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
	c := roomcellv1.NewRoomServiceClient(conn)
	for i := range 3 {
		if _, err := c.ListRooms(testCtx(t), &roomcellv1.ListRoomsRequest{AppCode: "app1"}); err != nil {
			t.Fatalf("list %d within the burst: %v", i, err)
		}
	}
	if _, err := c.ListRooms(testCtx(t), &roomcellv1.ListRoomsRequest{AppCode: "app1"}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("list past the app's burst: %v, want ResourceExhausted", err)
	}
	if _, err := c.ListRooms(testCtx(t), &roomcellv1.ListRoomsRequest{AppCode: "app2"}); err != nil {
		t.Fatalf("another app's list: %v", err)
	}
}
