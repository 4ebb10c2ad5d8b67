package grpcapi

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/ratelimit"
	"github.com/hyapp/roomcell/room"
)

// likeRoomBackend answers likes as a room would: a member's like is
// counted once under its command_id (its retry a duplicate, another count
// under it refused), a stranger's refused NOT_MEMBER, a banned user's
// BANNED, and "boom" panics. It counts the likes counted and the calls.
type likeRoomBackend struct {
	mu      sync.Mutex
	seen    map[string]int64 // command_id → count
	counted int64
	calls   atomic.Int64
	// gate, when set, holds every call until it is closed; inFlight and
	// maxInFlight count the calls held at once.
	gate                  chan struct{}
	inFlight, maxInFlight atomic.Int64
}

func newLikeRoomBackend() *likeRoomBackend { return &likeRoomBackend{seen: map[string]int64{}} }

func (b *likeRoomBackend) Execute(ctx context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	b.calls.Add(1)
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for {
		m := b.maxInFlight.Load()
		if n <= m || b.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l := cmd.GetLikeRoom()
	switch l.GetUserId() {
	case "stranger":
		return nil, room.ErrNotMember
	case "banned":
		return nil, room.ErrBanned
	case "boom":
		panic("a bug deciding a like")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := l.GetUserId() + "/" + l.GetCommandId()
	if c, ok := b.seen[key]; ok {
		if c != l.GetCount() {
			return nil, errclass.Errorf(errclass.Exists, "command_id %q was already used for another LikeRoom", l.GetCommandId())
		}
		return &roomcellv1.CommandReply{RoomSeq: 9, Duplicate: true}, nil
	}
	b.seen[key] = l.GetCount()
	b.counted += l.GetCount()
	return &roomcellv1.CommandReply{RoomSeq: 9}, nil
}

func (b *likeRoomBackend) total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counted
}

// likeStreamServer serves a RoomServer over b with like streams on.
func likeStreamServer(t *testing.T, o Options, b RoomBackend, lo LikeStreamOptions, l *ratelimit.Limiter) roomcellv1.RoomServiceClient {
	t.Helper()
	if o.Logger == nil {
		o.Logger = discardLogger()
	}
	rs := NewRoomServer(b, o.Logger, 0)
	rs.SetLikeStreams(lo)
	rs.SetLimiter(l)
	return roomcellv1.NewRoomServiceClient(serveRoomServer(t, o, rs))
}

type likeClient = grpc.BidiStreamingClient[roomcellv1.LikeStreamRequest, roomcellv1.LikeStreamAck]

// acksOf reads n acks by command_id.
func acksOf(t *testing.T, s likeClient, n int) map[string]*roomcellv1.LikeStreamAck {
	t.Helper()
	out := map[string]*roomcellv1.LikeStreamAck{}
	for range n {
		a, err := s.Recv()
		if err != nil {
			t.Fatalf("after %d acks: %v", len(out), err)
		}
		if _, dup := out[a.GetCommandId()]; dup {
			t.Fatalf("two acks for %s", a.GetCommandId())
		}
		out[a.GetCommandId()] = a
	}
	return out
}

// Each message of a stream is answered as the LikeRoom of its fields
// would be: the same status code, stable code, text and duplicate flag,
// message by message, for likes counted, retried, reused, out of bounds,
// malformed, from strangers and banned users; a message naming another
// user or room is refused LIKE_STREAM_MISMATCH without reaching the
// room; and the stream counts exactly what the unary calls count.
func TestLikeStreamAnswersAsLikeRoom(t *testing.T) {
	type like struct {
		id, user, room string
		count          int64
	}
	// Each user's case on a stream of its own, first message first.
	cases := map[string][]like{
		"u1":       {{"a", "u1", "", 3}, {"a", "u1", "", 3}, {"a", "u1", "", 4}, {"b", "", "", 0}, {"c", "", "", 101}, {"d", "", "", 100}, {"", "", "", 1}},
		"u2":       {{"a", "u2", "", 1}, {"b", "u3", "", 1}, {"c", "", "r2", 1}, {"d", "u2", "r1", 2}},
		"stranger": {{"a", "stranger", "", 1}, {"b", "", "", 1}},
		"banned":   {{"a", "banned", "", 1}},
	}
	unary, streamed := newLikeRoomBackend(), newLikeRoomBackend()
	uc := likeStreamServer(t, Options{}, unary, LikeStreamOptions{Max: 10}, nil)
	sc := likeStreamServer(t, Options{}, streamed, LikeStreamOptions{Max: 10}, nil)
	ctx := testCtx(t)
	for user, likes := range cases {
		s, err := sc.LikeStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range likes {
			r := l.room
			if i == 0 {
				r = "r1"
			}
			// One message in flight at a time: a retry reaches the room
			// after its first.
			if err := s.Send(&roomcellv1.LikeStreamRequest{CommandId: l.id, AppCode: "app1", RoomId: r, UserId: l.user, Count: l.count}); err != nil {
				t.Fatal(err)
			}
			a, err := s.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if a.GetCommandId() != l.id {
				t.Errorf("%s %d: ack for %q, sent %q", user, i, a.GetCommandId(), l.id)
			}
			mismatch := (l.user != "" && l.user != user) || (l.room != "" && l.room != "r1")
			if mismatch {
				if a.GetCode() != errclass.CodeLikeStreamMismatch.String() || codes.Code(a.GetGrpcCode()) != codes.InvalidArgument {
					t.Errorf("%s %d naming another liker: %+v", user, i, a)
				}
				continue
			}
			reply, err := uc.LikeRoom(ctx, &roomcellv1.LikeRoomRequest{CommandId: l.id, AppCode: "app1", RoomId: "r1", UserId: user, Count: l.count})
			st := status.Convert(err)
			code := ""
			if c := codeOf(st); c != 0 {
				code = c.String()
			}
			if codes.Code(a.GetGrpcCode()) != st.Code() || a.GetCode() != code || a.GetMessage() != st.Message() || a.GetDuplicate() != reply.GetDuplicate() || a.GetRoomSeq() != reply.GetRoomSeq() {
				t.Errorf("%s %d %+v: stream %+v, unary %v %q %v", user, i, l, a, st.Code(), code, reply)
			}
		}
		if err := s.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("after the client's end: %v, want EOF", err)
		}
	}
	if unary.total() != streamed.total() || unary.total() != 3+100+1+2 {
		t.Fatalf("counted unary %d, streamed %d, want 106", unary.total(), streamed.total())
	}
	// Refused by the gRPC layer (bounds, ids, mismatches): never at the room.
	if unary.calls.Load() != streamed.calls.Load() {
		t.Fatalf("the room got %d unary calls, %d streamed", unary.calls.Load(), streamed.calls.Load())
	}
}

// The per-user rate limit holds per message: a user's likes over one
// stream, over two streams and over LikeRoom all draw on the one bucket,
// so a stream admits no more than the unary calls (the limiter's clock
// stands still: exactly the burst passes, the rest is RATE_LIMITED with
// a retry delay and never reaches the room).
func TestLikeStreamRateLimitedPerMessage(t *testing.T) {
	cfg := configs.DefaultRateLimits()
	cfg.Enabled = true
	cfg.Command = configs.RateClassConfig{UserPerSecond: 5, UserBurst: 10, AppPerSecond: 10_000, AppBurst: 10_000}
	clock := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	b := newLikeRoomBackend()
	c := likeStreamServer(t, Options{}, b, LikeStreamOptions{Max: 10}, ratelimit.New(cfg).WithClock(clock))
	ctx := testCtx(t)
	open := func() likeClient {
		s, err := c.LikeStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1, s2 := open(), open()
	const each = 15
	for i := range each {
		for k, s := range []likeClient{s1, s2} {
			if err := s.Send(&roomcellv1.LikeStreamRequest{CommandId: fmt.Sprintf("s%d-%d", k, i), AppCode: "app1", RoomId: "r1", UserId: "heavy", Count: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	counted, limited := 0, 0
	for _, s := range []likeClient{s1, s2} {
		for id, a := range acksOf(t, s, each) {
			switch {
			case a.GetGrpcCode() == 0:
				counted++
			case a.GetCode() == errclass.CodeRateLimited.String() && codes.Code(a.GetGrpcCode()) == codes.ResourceExhausted && a.GetRetryAfterMs() > 0:
				limited++
			default:
				t.Errorf("%s: %+v", id, a)
			}
		}
	}
	if counted != cfg.Command.UserBurst || limited != 2*each-cfg.Command.UserBurst {
		t.Fatalf("two streams of %d likes: %d counted, %d rate limited; want the burst of %d counted", each, counted, limited, cfg.Command.UserBurst)
	}
	if got := b.calls.Load(); got != int64(counted) {
		t.Fatalf("the room got %d likes, %d were admitted", got, counted)
	}
	// The bucket is the user's, not the stream's: the unary call is out too.
	_, err := c.LikeRoom(ctx, &roomcellv1.LikeRoomRequest{CommandId: "u", AppCode: "app1", RoomId: "r1", UserId: "heavy", Count: 1})
	if codeOf(status.Convert(err)) != errclass.CodeRateLimited {
		t.Fatalf("unary after the streams spent the bucket: %v", err)
	}
	// Another user has a bucket of its own.
	if _, err := c.LikeRoom(ctx, &roomcellv1.LikeRoomRequest{CommandId: "u", AppCode: "app1", RoomId: "r1", UserId: "light", Count: 1}); err != nil {
		t.Fatal(err)
	}
}

// Auth is the gate's, at the stream's open: without a token or with a
// wrong one the stream ends Unauthenticated and no message of it reaches
// the room; a client token opens it. The other stream interceptors apply
// as to a unary call: the RPC metrics count the stream and its messages,
// the access log names it, and a panic deciding a like is answered
// Internal on the stream, which goes on.
func TestLikeStreamInterceptors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	b := newLikeRoomBackend()
	c := likeStreamServer(t, Options{ClientTokens: []string{clientTok}, Metrics: m, Logger: newTextLogger(&logs)}, b, LikeStreamOptions{Max: 10}, nil)
	for _, token := range []string{"", "not-a-token"} {
		s, err := c.LikeStream(bearerCtx(t, token))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			// The server may have ended the stream already: sends then
			// fail with EOF, the status comes from Recv.
			_ = s.Send(&roomcellv1.LikeStreamRequest{CommandId: fmt.Sprint("x", i), AppCode: "app1", RoomId: "r1", UserId: "u1", Count: 1})
		}
		if _, err := s.Recv(); status.Code(err) != codes.Unauthenticated || codeOf(status.Convert(err)) != errclass.CodeUnauthenticated {
			t.Fatalf("token %q: %v, want Unauthenticated", token, err)
		}
	}
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("a refused stream's likes reached the room %d times", n)
	}
	s, err := c.LikeStream(bearerCtx(t, clientTok))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := s.Send(&roomcellv1.LikeStreamRequest{CommandId: id, AppCode: "app1", RoomId: "r1", UserId: "u1", Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	acks := acksOf(t, s, 2)
	if acks["a"].GetGrpcCode() != 0 || acks["b"].GetGrpcCode() != 0 {
		t.Fatalf("with a client token: %v", acks)
	}
	s.CloseSend()
	if _, err := s.Recv(); err != io.EOF {
		t.Fatal(err)
	}
	// A panic in one like's decision: that like answered Internal, the
	// stream and the process go on.
	p, err := c.LikeStream(bearerCtx(t, clientTok))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p1", "p2"} {
		if err := p.Send(&roomcellv1.LikeStreamRequest{CommandId: id, AppCode: "app1", RoomId: "r1", UserId: "boom", Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for id, a := range acksOf(t, p, 2) {
		if codes.Code(a.GetGrpcCode()) != codes.Internal {
			t.Fatalf("%s of a panicking decision: %+v", id, a)
		}
	}
	p.CloseSend()
	if _, err := p.Recv(); err != io.EOF {
		t.Fatal(err)
	}
	// Two refused streams, two served; four likes read and answered
	// (the refused streams' messages were never read).
	for name, want := range map[string]float64{"grpc_server_started_total": 4, "grpc_server_msg_received_total": 4, "grpc_server_msg_sent_total": 4} {
		if got := likeStreamSeries(t, reg, name); got != want {
			t.Errorf("%s of LikeStream: %v, want %v", name, got, want)
		}
	}
	if !strings.Contains(logs.String(), "method=/roomcell.v1.RoomService/LikeStream") || !strings.Contains(logs.String(), "panic in rpc handler") {
		t.Errorf("access log / panic log without LikeStream:\n%s", logs.String())
	}
}

// A stream's bounds: at most LikeStreamInFlight of its messages wait for
// their acks (the server reads no more until one is answered, however
// many the client sends), a node serves at most Max streams (the next is
// refused LIKE_STREAM_LIMIT, and a closed one frees its place), and a
// stream with nothing sent and nothing owed for Idle ends with OK, but
// not while an ack is owed.
func TestLikeStreamBounds(t *testing.T) {
	b := newLikeRoomBackend()
	b.gate = make(chan struct{})
	c := likeStreamServer(t, Options{}, b, LikeStreamOptions{Max: 2, Idle: 300 * time.Millisecond}, nil)
	ctx := testCtx(t)
	s, err := c.LikeStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const sent = 3 * LikeStreamInFlight
	for i := range sent {
		if err := s.Send(&roomcellv1.LikeStreamRequest{CommandId: fmt.Sprint("l", i), AppCode: "app1", RoomId: "r1", UserId: "u1", Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); b.inFlight.Load() < LikeStreamInFlight && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	// Well past the idle time with acks owed: the stream stays.
	time.Sleep(600 * time.Millisecond)
	if got := b.maxInFlight.Load(); got != LikeStreamInFlight {
		t.Fatalf("%d of one stream's likes in flight at once, want %d", got, LikeStreamInFlight)
	}
	// The node's cap: a second stream opens, a third is refused.
	s2, err := c.LikeStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Send(&roomcellv1.LikeStreamRequest{CommandId: "x", AppCode: "app1", RoomId: "r1", UserId: "u2", Count: 1}); err != nil {
		t.Fatal(err)
	}
	// Its like at the room: the stream is open at the server.
	for deadline := time.Now().Add(5 * time.Second); b.inFlight.Load() < LikeStreamInFlight+1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	s3, err := c.LikeStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s3.Recv(); status.Code(err) != codes.ResourceExhausted || codeOf(status.Convert(err)) != errclass.CodeLikeStreamLimit {
		t.Fatalf("a third stream past the cap of 2: %v", err)
	}
	close(b.gate)
	acks := acksOf(t, s, sent)
	for id, a := range acks {
		if a.GetGrpcCode() != 0 {
			t.Fatalf("%s: %+v", id, a)
		}
	}
	if b.maxInFlight.Load() > LikeStreamInFlight+1 { // s's, and s2's one like
		t.Fatalf("%d likes in flight at once", b.maxInFlight.Load())
	}
	// Nothing sent, nothing owed: the stream ends on its own, with OK.
	t0 := time.Now()
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("an idle stream: %v, want its end (EOF)", err)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("an idle stream ended after %v", d)
	}
	if a, err := s2.Recv(); err != nil || a.GetGrpcCode() != 0 {
		t.Fatalf("second stream: %v %v", a, err)
	}
	if _, err := s2.Recv(); err != io.EOF {
		t.Fatalf("second stream idle: %v", err)
	}
	// The ended streams' places are free again.
	s4, err := c.LikeStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s4.Send(&roomcellv1.LikeStreamRequest{CommandId: "y", AppCode: "app1", RoomId: "r1", UserId: "u3", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if a, err := s4.Recv(); err != nil || a.GetGrpcCode() != 0 {
		t.Fatalf("a stream after the others ended: %v %v", a, err)
	}
	if b.total() != sent+2 {
		t.Fatalf("counted %d, want %d", b.total(), sent+2)
	}
}

// Without SetLikeStreams a server answers LikeStream Unimplemented.
func TestLikeStreamOffUnimplemented(t *testing.T) {
	c := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, newLikeRoomBackend()))
	s, err := c.LikeStream(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("%v", err)
	}
}

// likeStreamSeries sums name's series of LikeStream in reg.
func likeStreamSeries(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_method" && l.GetValue() == "LikeStream" {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// A LikeStream message that is no message (garbage, a bad tag, a
// truncated field) ends the stream InvalidArgument (its command_id is
// unknown, so no ack can name it); one with invalid UTF-8 in a field is
// refused by name in its ack, as LikeRoom refuses it, and the stream
// goes on; without a token, Unauthenticated first, whatever the body.
func TestLikeStreamBadBodies(t *testing.T) {
	b := newLikeRoomBackend()
	rs := NewRoomServer(b, discardLogger(), 0)
	rs.SetLikeStreams(LikeStreamOptions{Max: 10})
	conn := serveRoomServer(t, Options{Logger: discardLogger(), ClientTokens: []string{clientTok}}, rs)
	badUTF8 := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff\xfe")
	for what, body := range map[string][]byte{
		"garbage":   {0xff, 0xff, 0xff, 0xff},
		"bad tag":   {0x0f, 0x01},
		"truncated": {0x0a, 0x40, 'a'},
	} {
		var out []byte
		if err := conn.Invoke(bearerCtx(t, clientTok), roomcellv1.RoomService_LikeStream_FullMethodName, &body, &out, grpc.ForceCodecV2(rawCodec{})); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s body: %v, want InvalidArgument", what, err)
		}
		if err := conn.Invoke(testCtx(t), roomcellv1.RoomService_LikeStream_FullMethodName, &body, &out, grpc.ForceCodecV2(rawCodec{})); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s body without a token: %v, want Unauthenticated", what, err)
		}
	}
	body := append(badUTF8, protowire.AppendVarint(protowire.AppendTag(nil, 6, protowire.VarintType), 1)...)
	body = protowire.AppendString(protowire.AppendTag(body, 3, protowire.BytesType), "app1")
	body = protowire.AppendString(protowire.AppendTag(body, 4, protowire.BytesType), "r1")
	body = protowire.AppendString(protowire.AppendTag(body, 5, protowire.BytesType), "u1")
	var out []byte
	if err := conn.Invoke(bearerCtx(t, clientTok), roomcellv1.RoomService_LikeStream_FullMethodName, &body, &out, grpc.ForceCodecV2(rawCodec{})); err != nil {
		t.Fatalf("invalid UTF-8 in command_id: %v, want an ack", err)
	}
	var a roomcellv1.LikeStreamAck
	if err := proto.Unmarshal(out, &a); err != nil {
		t.Fatal(err)
	}
	if codes.Code(a.GetGrpcCode()) != codes.InvalidArgument || !strings.Contains(a.GetMessage(), "command_id") {
		t.Fatalf("invalid UTF-8 in command_id: %+v", &a)
	}
	if b.calls.Load() != 0 {
		t.Fatalf("bad bodies reached the room %d times", b.calls.Load())
	}
}
