package grpcapi

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// fakeEvents answers ListEvents with list and serves Watch with watch,
// accepting each watch first as the room's owner does. With wire, each
// page carries wire's encoding of each event (the room's tail: an
// event's own encoding).
type fakeEvents struct {
	list  func(r *roomcellv1.ListRoomEventsRequest) (*roomcellv1.ListRoomEventsReply, error)
	watch func(ctx context.Context, after int64, send func(*roomcellv1.WatchRoomReply) error) error
	wire  func(*roomcellv1.RoomLogEvent) []byte
}

func (f *fakeEvents) ListEventsPage(_ context.Context, r *roomcellv1.ListRoomEventsRequest) (roomfeed.EventsPage, error) {
	reply, err := f.list(r)
	if err != nil {
		return roomfeed.EventsPage{}, err
	}
	p := roomfeed.EventsPage{Reply: reply}
	if f.wire != nil {
		for _, e := range reply.Events {
			p.Wire = append(p.Wire, f.wire(e))
		}
	}
	return p, nil
}

func (f *fakeEvents) Watch(ctx context.Context, _, _ string, after int64, accepted func() error, send func(*roomcellv1.WatchRoomReply) error) error {
	if err := accepted(); err != nil {
		return err
	}
	return f.watch(ctx, after, send)
}

// marshalEvent is an event's own encoding.
func marshalEvent(e *roomcellv1.RoomLogEvent) []byte {
	b, err := proto.Marshal(e)
	if err != nil {
		panic(err)
	}
	return b
}

func startEventsServer(t *testing.T, o Options, e RoomEvents, maxStreams int) roomcellv1.RoomServiceClient {
	t.Helper()
	o.Logger = discardLogger()
	lis := bufconn.Listen(1 << 20)
	srv, _ := NewServer(o)
	rs := NewRoomServer(&fakeBackend{}, o.Logger, 0)
	rs.SetEvents(e, maxStreams)
	RegisterRoomService(srv, rs)
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

func TestListRoomEventsChecksItsArgumentsAndSaysTrimmed(t *testing.T) {
	var got *roomcellv1.ListRoomEventsRequest
	e := &fakeEvents{list: func(r *roomcellv1.ListRoomEventsRequest) (*roomcellv1.ListRoomEventsReply, error) {
		got = r
		if r.AfterRoomSeq < 10 {
			return nil, &roomfeed.TrimmedError{After: r.AfterRoomSeq, OldestAfterSeq: 10, HeadSeq: 30}
		}
		return &roomcellv1.ListRoomEventsReply{NextAfterSeq: 30, HeadSeq: 30}, nil
	}}
	c := startEventsServer(t, Options{}, e, 10)
	ctx := testCtx(t)
	for _, bad := range []*roomcellv1.ListRoomEventsRequest{
		{AppCode: "", RoomId: "r1"},
		{AppCode: "a", RoomId: ""},
		{AppCode: "a", RoomId: "r1", AfterRoomSeq: -1},
		{AppCode: "a", RoomId: "r1", Limit: -1},
		{AppCode: "a", RoomId: "r1", Limit: 1001},
	} {
		if _, err := c.ListRoomEvents(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", bad, err)
		}
	}
	r, err := c.ListRoomEvents(ctx, &roomcellv1.ListRoomEventsRequest{AppCode: "a", RoomId: "r1", AfterRoomSeq: 12, Limit: 1000})
	if err != nil || r.HeadSeq != 30 || got.RequestId == "" {
		t.Fatalf("reply %v err %v (request id %q)", r, err, got.GetRequestId())
	}
	_, err = c.ListRoomEvents(ctx, &roomcellv1.ListRoomEventsRequest{AppCode: "a", RoomId: "r1", AfterRoomSeq: 3})
	head, ok := TrimmedHead(err)
	if status.Code(err) != codes.OutOfRange || !ok || head != 30 {
		t.Fatalf("trimmed: %v (head %d %v)", err, head, ok)
	}
	// Room errors keep the shared vocabulary.
	e.list = func(*roomcellv1.ListRoomEventsRequest) (*roomcellv1.ListRoomEventsReply, error) {
		return nil, room.ErrRoomNotFound
	}
	if _, err := c.ListRoomEvents(ctx, &roomcellv1.ListRoomEventsRequest{AppCode: "a", RoomId: "r1"}); status.Code(err) != codes.NotFound {
		t.Fatalf("not found: %v", err)
	}
}

// recvAll reads a stream to its end.
func recvAll(s grpc.ServerStreamingClient[roomcellv1.WatchRoomReply]) ([]int64, error) {
	var seqs []int64
	for {
		m, err := s.Recv()
		if err != nil {
			return seqs, err
		}
		seqs = append(seqs, m.RoomSeq)
	}
}

func TestWatchRoomEndsWithItsResumeSeq(t *testing.T) {
	var end error
	e := &fakeEvents{watch: func(ctx context.Context, after int64, send func(*roomcellv1.WatchRoomReply) error) error {
		for s := after + 1; s <= after+3; s++ {
			if err := send(&roomcellv1.WatchRoomReply{RoomSeq: s}); err != nil {
				return err
			}
		}
		return end
	}}
	c := startEventsServer(t, Options{}, e, 10)
	for _, tc := range []struct {
		end    error
		code   codes.Code
		resume int64
	}{
		{&roomfeed.WatchEndedError{ResumeAfter: 8, Reason: roomfeed.EndMoved}, codes.Unavailable, 8},
		{&roomfeed.WatchEndedError{ResumeAfter: 8, Cut: true, Reason: roomfeed.EndCut}, codes.ResourceExhausted, 8},
		{&roomfeed.TrimmedError{After: 5, OldestAfterSeq: 7, HeadSeq: 9}, codes.OutOfRange, -1},
	} {
		end = tc.end
		s, err := c.WatchRoom(testCtx(t), &roomcellv1.WatchRoomRequest{AppCode: "a", RoomId: "r1", AfterRoomSeq: 5})
		if err != nil {
			t.Fatal(err)
		}
		seqs, err := recvAll(s)
		if len(seqs) != 3 || seqs[0] != 6 || status.Code(err) != tc.code {
			t.Fatalf("%v: got %v then %v", tc.end, seqs, err)
		}
		if resume, ok := ResumeAfterSeq(err); tc.resume >= 0 && (!ok || resume != tc.resume) {
			t.Fatalf("%v: resume %d %v", tc.end, resume, ok)
		}
	}
}

// The node's cap on open streams refuses the one past it, and a closed
// stream frees its place.
func TestWatchRoomCapsStreamsPerNode(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	open := 0
	e := &fakeEvents{watch: func(ctx context.Context, after int64, send func(*roomcellv1.WatchRoomReply) error) error {
		mu.Lock()
		open++
		mu.Unlock()
		if err := send(&roomcellv1.WatchRoomReply{RoomSeq: after + 1}); err != nil {
			return err
		}
		select {
		case <-release:
			return &roomfeed.WatchEndedError{ResumeAfter: after + 1, Reason: roomfeed.EndDraining}
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	c := startEventsServer(t, Options{}, e, 2)
	ctx := testCtx(t)
	var streams []grpc.ServerStreamingClient[roomcellv1.WatchRoomReply]
	for range 2 {
		s, err := c.WatchRoom(ctx, &roomcellv1.WatchRoomRequest{AppCode: "a", RoomId: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	s, _ := c.WatchRoom(ctx, &roomcellv1.WatchRoomRequest{AppCode: "a", RoomId: "r1"})
	if _, err := s.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third stream: %v", err)
	}
	close(release)
	for _, s := range streams {
		if _, err := recvAll(s); status.Code(err) != codes.Unavailable {
			t.Fatalf("released stream: %v", err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, _ := c.WatchRoom(ctx, &roomcellv1.WatchRoomRequest{AppCode: "a", RoomId: "r1"})
		_, err := s.Recv()
		if err == nil || errors.Is(err, io.EOF) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no place freed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The event log takes a client token like the rest of RoomService.
func TestRoomEventsNeedAClientToken(t *testing.T) {
	e := &fakeEvents{
		list: func(*roomcellv1.ListRoomEventsRequest) (*roomcellv1.ListRoomEventsReply, error) {
			return &roomcellv1.ListRoomEventsReply{}, nil
		},
		watch: func(context.Context, int64, func(*roomcellv1.WatchRoomReply) error) error { return nil },
	}
	c := startEventsServer(t, Options{ClientTokens: []string{clientTok}}, e, 10)
	if _, err := c.ListRoomEvents(testCtx(t), &roomcellv1.ListRoomEventsRequest{AppCode: "a", RoomId: "r1"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("list without token: %v", err)
	}
	s, _ := c.WatchRoom(testCtx(t), &roomcellv1.WatchRoomRequest{AppCode: "a", RoomId: "r1"})
	if _, err := s.Recv(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("watch without token: %v", err)
	}
	if _, err := c.ListRoomEvents(bearerCtx(t, clientTok), &roomcellv1.ListRoomEventsRequest{AppCode: "a", RoomId: "r1"}); err != nil {
		t.Fatalf("list with token: %v", err)
	}
	s, _ = c.WatchRoom(bearerCtx(t, clientTok), &roomcellv1.WatchRoomRequest{AppCode: "a", RoomId: "r1"})
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("watch with token: %v", err)
	}
}
