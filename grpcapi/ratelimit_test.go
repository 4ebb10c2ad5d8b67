package grpcapi

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/ratelimit"
	"github.com/hyapp/roomcell/room"
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

// ListRooms (a scan of the directory) passes the app's read bucket.
func TestRateLimitListRooms(t *testing.T) {
	cfg := configs.DefaultRateLimits()
	cfg.Enabled = true
	cfg.Read = configs.RateClassConfig{UserPerSecond: 1, UserBurst: 3, AppPerSecond: 1, AppBurst: 3}
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

// A poller reading one room at ten times the app's read rate, beside 100
// honest users sending commands, reading with their x-user-id and
// retrying answered command_ids: the honest users are never refused, the
// poller is refused by its own share (its bearer token) and gets no more
// than that share, and a retry of an answered command_id costs nothing.
func TestPollerCannotStarveHonestUsers(t *testing.T) {
	cfg := configs.DefaultRateLimits()
	cfg.Enabled = true
	cfg.Read = configs.RateClassConfig{UserPerSecond: 10, UserBurst: 20, AppPerSecond: 100, AppBurst: 200}
	cfg.Command = configs.RateClassConfig{UserPerSecond: 2, UserBurst: 3, AppPerSecond: 200, AppBurst: 400}
	var now atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	now.Store(start)
	var mu sync.Mutex
	answered := map[string]bool{}
	b := &fakeBackend{reply: func(_ context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		r := cannedReply()
		if id := room.Request(cmd).ProtoReflect(); id.Descriptor().Fields().ByName("command_id") != nil {
			cid := id.Get(id.Descriptor().Fields().ByName("command_id")).String()
			mu.Lock()
			r.Duplicate = answered[cid]
			answered[cid] = true
			mu.Unlock()
		}
		return r, nil
	}}
	c := limitedClient(t, b, ratelimit.New(cfg).WithClock(func() time.Time { return time.Unix(0, now.Load()) }))
	// Thousands of calls: longer than testCtx under the race detector.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pollerCtx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer app-backend-token")
	const steps = 6000 // 6 s at 1000 reads a second: ten times the app's 100
	var pollerOK, pollerRefused, honestCmds, honestReads, retries int
	var refusedHonest []string
	for i := range steps {
		now.Add(int64(time.Millisecond))
		switch _, err := c.GetRoom(pollerCtx, &roomcellv1.GetRoomRequest{AppCode: "app1", RoomId: "r1"}); status.Code(err) {
		case codes.OK:
			pollerOK++
		case codes.ResourceExhausted:
			pollerRefused++
		default:
			t.Fatalf("poller: %v", err)
		}
		if i%30 != 0 {
			continue
		}
		// Every 30 ms one of 100 users, each once every 3 s: a command, a
		// read as itself, and five retries of that command_id, answered.
		u := fmt.Sprint("u", (i/30)%100)
		n := i / 3000
		uctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer app-backend-token", UserIDHeader, u)
		name := fmt.Sprint("room ", n)
		if _, err := c.UpdateRoom(uctx, &roomcellv1.UpdateRoomRequest{CommandId: fmt.Sprintf("%s-%d", u, n), AppCode: "app1", RoomId: "r1", UserId: u, Name: name}); err != nil {
			refusedHonest = append(refusedHonest, fmt.Sprintf("%s UpdateRoom: %v", u, err))
		}
		honestCmds++
		if _, err := c.GetRoom(uctx, &roomcellv1.GetRoomRequest{AppCode: "app1", RoomId: "r1"}); err != nil {
			refusedHonest = append(refusedHonest, fmt.Sprintf("%s GetRoom: %v", u, err))
		}
		honestReads++
		for range 5 {
			if _, err := c.UpdateRoom(uctx, &roomcellv1.UpdateRoomRequest{CommandId: fmt.Sprintf("%s-%d", u, n), AppCode: "app1", RoomId: "r1", UserId: u, Name: name}); err != nil {
				refusedHonest = append(refusedHonest, fmt.Sprintf("%s retry: %v", u, err))
			}
			retries++
		}
	}
	if len(refusedHonest) > 0 {
		t.Fatalf("%d of the honest users' calls refused, want 0; first: %s", len(refusedHonest), refusedHonest[0])
	}
	// The poller's share: its burst and its rate over the 6 s.
	if share := 20 + 10*6 + 1; pollerOK > share || pollerRefused == 0 {
		t.Fatalf("poller: %d through, %d refused; want at most its share %d", pollerOK, pollerRefused, share)
	}
	t.Logf("6 s: poller %d reads through, %d refused; honest users %d commands, %d reads, %d retries of answered ids: 0 refused",
		pollerOK, pollerRefused, honestCmds, honestReads, retries)
}

// A call's rate class: a command's from its row in room's command table,
// a read's apart. Every class a row names is a bucket of rate_limits.
func TestRateClasses(t *testing.T) {
	for cmd, want := range map[string]string{room.CmdCreateRoom: "create", room.CmdReopenRoom: "create", room.CmdJoinRoom: "join",
		room.CmdSendGift: "gift", room.CmdBanUser: "moderation", room.CmdTakeMic: "command",
		// Reads are a class apart: polling spends no command's token.
		"GetRoom": "read", "ListBans": "read", "ListRooms": "read", "ListSeatRequests": "read", room.CmdSetRoomMetadata: "command"} {
		if got := rateClass(cmd); got != want {
			t.Errorf("rateClass(%s) = %s, want %s", cmd, got, want)
		}
	}
	classes := configs.DefaultRateLimits().Classes()
	for _, cmd := range room.CommandTypes() {
		if _, ok := classes[rateClass(cmd)]; !ok {
			t.Errorf("%s's rate class %q is no bucket of rate_limits", cmd, rateClass(cmd))
		}
	}
}

// The edge reads a room command once (room.ParseClientCommand): for every
// request of the grain protocol, that one read names the same rate class
// the edge's per-RPC table does, a bucket of rate_limits, and the room and
// user the request carries.
func TestParseOnceNamesTheRateClassAndKey(t *testing.T) {
	classes := configs.DefaultRateLimits().Classes()
	if room.RateRead != ratelimit.ClassRead {
		t.Fatalf("room.RateRead %q, ratelimit.ClassRead %q: one bucket, two names", room.RateRead, ratelimit.ClassRead)
	}
	oneof := (&roomcellv1.RoomCommand{}).ProtoReflect().Descriptor().Oneofs().ByName("command").Fields()
	for i := range oneof.Len() {
		fd := oneof.Get(i)
		rc := &roomcellv1.RoomCommand{}
		req := rc.ProtoReflect().NewField(fd).Message()
		fields := req.Descriptor().Fields()
		for _, f := range []struct{ name, v string }{{"app_code", "app-1"}, {"room_id", "room-1"}, {"user_id", "user-1"}} {
			if d := fields.ByName(protoreflect.Name(f.name)); d != nil {
				req.Set(d, protoreflect.ValueOfString(f.v))
			}
		}
		rc.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(req))
		p, _ := room.ParseClientCommand(rc) // the fields it checks are beside the point here
		typ := string(req.Descriptor().Name())[:len(req.Descriptor().Name())-len("Request")]
		if p.Type != typ {
			t.Errorf("%s: type %q, want %q", fd.Name(), p.Type, typ)
		}
		if want := rateClass(typ); p.Rate != want {
			t.Errorf("%s: parsed rate class %q, the edge's table says %q", typ, p.Rate, want)
		}
		if _, ok := classes[p.Rate]; !ok {
			t.Errorf("%s: rate class %q is no bucket of rate_limits", typ, p.Rate)
		}
		if app, r := room.KeyOf(rc); p.AppCode != app || p.RoomID != r || app != "app-1" || r != "room-1" {
			t.Errorf("%s: parsed key %s/%s, KeyOf %s/%s", typ, p.AppCode, p.RoomID, app, r)
		}
		if wantUser := fields.ByName("user_id") != nil; (p.UserID == "user-1") != wantUser {
			t.Errorf("%s: parsed user %q (has user_id: %v)", typ, p.UserID, wantUser)
		}
	}
	for typ, want := range map[string]string{"GetRoom": "read", "ListBans": "read", "ListContributors": "read", "GetJoinTicket": "command"} {
		if got := room.RateClassOf(typ); got != want {
			t.Errorf("RateClassOf(%s) = %s, want %s", typ, got, want)
		}
	}
}
