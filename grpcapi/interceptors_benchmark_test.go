package grpcapi

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// headerStream is the transport stream grpc.SetHeader writes to.
type headerStream struct{ header metadata.MD }

func (s *headerStream) Method() string { return roomcellv1.RoomService_JoinRoom_FullMethodName }
func (s *headerStream) SetHeader(md metadata.MD) error {
	s.header = metadata.Join(s.header, md) // what grpc-go's transport does
	return nil
}
func (s *headerStream) SendHeader(metadata.MD) error { return nil }
func (s *headerStream) SetTrailer(metadata.MD) error { return nil }

// cannedBackend answers every command with one reply, allocating nothing.
type cannedBackend struct{ reply *roomcellv1.CommandReply }

func (b cannedBackend) Execute(context.Context, *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
	return b.reply, nil
}

// BenchmarkJoinRoomInterceptors measures a JoinRoom between the transport
// and the backend: the server's unary interceptors in their order, with
// tokens on, around RoomServer.JoinRoom with a command timeout of 5 s. The
// incoming metadata is a grpc-go client's with a bearer token, and the
// call has a deadline (as grpc-go's transport sets from grpc-timeout)
// earlier than the command timeout. Read allocs/op and B/op.
func BenchmarkJoinRoomInterceptors(b *testing.B) {
	log := discardLogger()
	unary, _ := interceptors(Options{ClientTokens: []string{"client-token"}, OperatorTokens: []string{"operator-token"}}, log)
	rs := NewRoomServer(cannedBackend{cannedReply()}, log, 5*time.Second)
	info := &grpc.UnaryServerInfo{Server: rs, FullMethod: roomcellv1.RoomService_JoinRoom_FullMethodName}
	h := func(ctx context.Context, req any) (any, error) {
		return rs.JoinRoom(ctx, req.(*roomcellv1.JoinRoomRequest))
	}
	for i := len(unary) - 1; i >= 0; i-- {
		next, in := h, unary[i]
		h = func(ctx context.Context, req any) (any, error) { return in(ctx, req, info, next) }
	}
	md := metadata.MD{
		":authority":    {"127.0.0.1:13001"},
		"content-type":  {"application/grpc"},
		"user-agent":    {"grpc-go/1.85.0"},
		"te":            {"trailers"},
		"authorization": {"Bearer client-token"},
	}
	incoming := metadata.NewIncomingContext(context.Background(), md)
	b.ReportAllocs()
	for b.Loop() {
		// What the transport gives each call.
		ctx, cancel := context.WithTimeout(incoming, 4*time.Second)
		ctx = grpc.NewContextWithServerTransportStream(ctx, &headerStream{})
		req := &roomcellv1.JoinRoomRequest{CommandId: "c1", AppCode: "demo", RoomId: "r1", UserId: "u-100001"}
		if _, err := h(ctx, req); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}
