package grpcapi

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// serveRegistered serves rs as cmd/roomcell does (RegisterRoomService:
// GetRoom and ListRoomEvents answered from kept encodings).
func serveRegistered(t *testing.T, rs *RoomServer) roomcellv1.RoomServiceClient {
	t.Helper()
	return serveRegisteredOn(t, rs, nil)
}

// serveRegisteredOn is serveRegistered with the server's listener wrapped
// by wrap (when not nil).
func serveRegisteredOn(t *testing.T, rs *RoomServer, wrap func(net.Listener) net.Listener) roomcellv1.RoomServiceClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv, _ := NewServer(Options{Logger: discardLogger()})
	RegisterRoomService(srv, rs)
	var served net.Listener = lis
	if wrap != nil {
		served = wrap(lis)
	}
	go func() { _ = srv.Serve(served) }()
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

func roomReply(seq int64, members ...string) *roomcellv1.CommandReply {
	return &roomcellv1.CommandReply{RoomSeq: seq, NextPageToken: fmt.Sprint("next-", seq),
		Room: &roomcellv1.RoomView{AppCode: "a", RoomId: "r", Seq: seq, MemberCount: int64(len(members)), Members: members}}
}

// GetRoom's answer from a kept encoding is the room's reply, byte for
// byte what the standard codec makes of it; the same reply answered again
// is sent from the same encoding, and the room's next reply (a commit) is
// sent as itself, never from the encoding of the one before.
func TestGetRoomSentFromKeptEncodingNeverStale(t *testing.T) {
	var current atomic.Pointer[roomcellv1.CommandReply]
	current.Store(roomReply(1, "owner"))
	b := &fakeBackend{reply: func(context.Context, *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		return current.Load(), nil
	}}
	rs := NewRoomServer(b, discardLogger(), 0)
	client := serveRegistered(t, rs)
	ctx := testCtx(t)
	for seq := int64(1); seq <= 30; seq++ {
		members := make([]string, seq)
		for i := range members {
			members[i] = fmt.Sprintf("u%03d", i)
		}
		r := roomReply(seq, members...)
		current.Store(r)
		want := &roomcellv1.GetRoomReply{Room: r.Room, NextPageToken: r.NextPageToken}
		for read := range 3 {
			got, err := client.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "a", RoomId: "r"})
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("seq %d read %d: got seq %d with %d members, want seq %d with %d", seq, read, got.GetRoom().GetSeq(), len(got.GetRoom().GetMembers()), seq, seq)
			}
		}
		if enc := rs.getRoomWires.of(r); enc.wire == nil || string(enc.wire) != string(mustMarshal(t, want)) {
			t.Fatalf("seq %d: kept encoding differs from proto.Marshal of the answer", seq)
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Many rooms read at once through one server, each reply new or shared
// (slots collide): every caller gets its own room's answer.
func TestGetRoomKeptEncodingsUnderManyRooms(t *testing.T) {
	shared := make([]*roomcellv1.CommandReply, 200)
	for i := range shared {
		shared[i] = roomReply(int64(i+1), fmt.Sprint("m", i))
	}
	b := &fakeBackend{reply: func(_ context.Context, cmd *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		var i int
		fmt.Sscanf(cmd.GetGetRoom().GetRoomId(), "r%d", &i)
		if i%2 == 0 {
			return shared[i], nil // a room's kept reply
		}
		return roomReply(int64(i+1), fmt.Sprint("m", i)), nil // a new one each time (another member's, decoded)
	}}
	server := NewRoomServer(b, discardLogger(), 0)
	client := serveRegistered(t, server)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Go(func() {
			for k := range 100 {
				i := (g*37 + k*11) % len(shared)
				got, err := client.GetRoom(ctx, &roomcellv1.GetRoomRequest{AppCode: "a", RoomId: fmt.Sprint("r", i)})
				if err != nil {
					errs <- err
					return
				}
				if got.GetRoom().GetSeq() != int64(i+1) || len(got.GetRoom().GetMembers()) != 1 || got.GetRoom().GetMembers()[0] != fmt.Sprint("m", i) {
					errs <- fmt.Errorf("room r%d answered with seq %d members %v", i, got.GetRoom().GetSeq(), got.GetRoom().GetMembers())
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The kept encodings are sent as they are, not copied: after all
	// those sends each is still its reply's encoding, byte for byte.
	for i := 0; i < len(shared); i += 2 {
		want := &roomcellv1.GetRoomReply{Room: shared[i].Room, NextPageToken: shared[i].NextPageToken}
		if enc := server.getRoomWires.of(shared[i]); string(enc.wire) != string(mustMarshal(t, want)) {
			t.Fatalf("room r%d: the kept encoding changed after being sent", i)
		}
	}
}
