package main

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// like-stream sends its likes as LikeRoom commands over one stream (more
// than a stream holds in flight): each under <command-id>-<n> with
// --count, for --user in --app/--room, and prints each ack; a refusal is printed and fails the command with its
// code.
func TestRoomctlLikeStream(t *testing.T) {
	addr, b := startRoomTestServer(t)
	code, out, errOut := runCtl(t, addr, "like-stream", "--app", "app1", "--room", "r1", "--user", "u1", "--command-id", "c9", "--count", "4", "--times", "40")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := map[string]bool{}
	for _, c := range b.got {
		l := c.GetLikeRoom()
		l.RequestId = ""
		if !proto.Equal(l, &roomcellv1.LikeRoomRequest{CommandId: l.CommandId, AppCode: "app1", RoomId: "r1", UserId: "u1", Count: 4}) {
			t.Fatalf("server got %v", c)
		}
		got[l.CommandId] = true
	}
	for i := 1; i <= 40; i++ {
		id := fmt.Sprintf("c9-%d", i)
		if !got[id] || !strings.Contains(out, "command_id "+id+"  seq 3  duplicate no") {
			t.Fatalf("%s: server got %v, output:\n%s", id, got, out)
		}
	}
	if len(b.got) != 40 {
		t.Fatalf("server got %d likes, want 40", len(b.got))
	}
	b.notMember = true
	code, out, errOut = runCtl(t, addr, "like-stream", "--app", "app1", "--room", "r1", "--user", "u1", "--command-id", "d", "--times", "2")
	if code == 0 || !strings.Contains(out, "command_id d-1  refused FailedPrecondition NOT_MEMBER") || !strings.Contains(errOut, "FailedPrecondition: user is not a member") {
		t.Fatalf("a stranger's likes: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// flakyLikeStreams acks the first stream's first like, then ends it
// Unavailable; every later stream acks what it gets (a command_id it
// acked before as a duplicate). It records the command_ids sent per stream.
type flakyLikeStreams struct {
	roomcellv1.UnimplementedRoomServiceServer
	mu      sync.Mutex
	streams [][]string
	acked   map[string]bool
}

func (f *flakyLikeStreams) LikeStream(s grpc.BidiStreamingServer[roomcellv1.LikeStreamRequest, roomcellv1.LikeStreamAck]) error {
	f.mu.Lock()
	n := len(f.streams)
	f.streams = append(f.streams, nil)
	f.mu.Unlock()
	for {
		m, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.streams[n] = append(f.streams[n], m.GetCommandId())
		dup := f.acked[m.GetCommandId()]
		f.acked[m.GetCommandId()] = true
		f.mu.Unlock()
		if err := s.Send(&roomcellv1.LikeStreamAck{CommandId: m.GetCommandId(), RoomSeq: 5, Duplicate: dup}); err != nil {
			return err
		}
		if n == 0 {
			return status.Error(codes.Unavailable, "the room moved")
		}
	}
}

// A stream the server ends before every like is answered is opened
// again, and only the likes without an ack are sent again, under their
// command_ids; each like is printed once.
func TestRoomctlLikeStreamResendsUnacked(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	f := &flakyLikeStreams{acked: map[string]bool{}}
	roomcellv1.RegisterRoomServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	code, out, errOut := runCtl(t, lis.Addr().String(), "like-stream", "--app", "app1", "--room", "r1", "--user", "u1", "--command-id", "k", "--times", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.streams) != 2 || len(f.streams[0]) != 1 || f.streams[0][0] != "k-1" || strings.Join(f.streams[1], ",") != "k-2,k-3,k-4" {
		t.Fatalf("streams got %v; want k-1 on the first, k-2..4 again on the second", f.streams)
	}
	for i := 1; i <= 4; i++ {
		if n := strings.Count(out, fmt.Sprintf("command_id k-%d ", i)); n != 1 {
			t.Fatalf("k-%d printed %d times:\n%s", i, n, out)
		}
	}
}
