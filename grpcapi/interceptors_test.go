package grpcapi

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

func joinReq() *roomcellv1.JoinRoomRequest {
	return &roomcellv1.JoinRoomRequest{CommandId: "c1", AppCode: "a", RoomId: "r", UserId: "u"}
}

func TestBackendPanicIsInternalAndServerLives(t *testing.T) {
	panicking := true
	b := &fakeBackend{}
	b.reply = func(context.Context, *roomcellv1.RoomCommand) (*roomcellv1.CommandReply, error) {
		b.mu.Lock()
		p := panicking
		panicking = false
		b.mu.Unlock()
		if p {
			panic("boom: nil map in grain client")
		}
		return cannedReply(), nil
	}
	logs := &syncBuffer{}
	client := roomcellv1.NewRoomServiceClient(startServer(t, Options{Logger: newTextLogger(logs)}, b))
	ctx := metadata.AppendToOutgoingContext(testCtx(t), RequestIDHeader, "req-panic")

	_, err := client.JoinRoom(ctx, joinReq())
	assertCode(t, err, codes.Internal)
	if msg := status.Convert(err).Message(); strings.Contains(msg, "boom") || !strings.Contains(msg, "req-panic") {
		t.Fatalf("panic reply %q: want the request id and not the panic text", msg)
	}
	log := logs.String()
	for _, want := range []string{"panic in rpc handler", "boom", "req-panic", "goroutine"} {
		if !strings.Contains(log, want) {
			t.Errorf("panic log lacks %q:\n%s", want, log)
		}
	}

	reply, err := client.JoinRoom(testCtx(t), joinReq())
	if err != nil {
		t.Fatalf("call after panic: %v", err)
	}
	if reply.GetRoomSeq() != 7 {
		t.Fatalf("room_seq %d after panic, want 7", reply.GetRoomSeq())
	}
}

func TestAuth(t *testing.T) {
	const token = "s3cret-token"
	b := &fakeBackend{}
	conn := startServer(t, Options{ClientTokens: []string{token}}, b)
	client := roomcellv1.NewRoomServiceClient(conn)
	bearer := func(v string) context.Context {
		return metadata.AppendToOutgoingContext(testCtx(t), "authorization", v)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"no token", testCtx(t), codes.Unauthenticated},
		{"wrong token", bearer("Bearer nope"), codes.Unauthenticated},
		{"token prefix", bearer("Bearer s3cret"), codes.Unauthenticated},
		{"wrong scheme", bearer("Basic " + token), codes.Unauthenticated},
		{"right token", bearer("Bearer " + token), codes.OK},
		{"scheme case-insensitive", bearer("bearer " + token), codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.JoinRoom(tc.ctx, joinReq())
			assertCode(t, err, tc.want)
			if err != nil && strings.Contains(status.Convert(err).Message(), token) {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
	if n := len(b.calls()); n != 2 {
		t.Fatalf("backend called %d times, want 2 (authenticated calls only)", n)
	}

	t.Run("health and reflection exempt", func(t *testing.T) {
		if _, err := healthpb.NewHealthClient(conn).Check(testCtx(t), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health without token: %v", err)
		}
		if s := listServices(t, testCtx(t), conn); !strings.Contains(s, "roomcell.v1.RoomService") {
			t.Fatalf("reflection without token listed %q", s)
		}
	})
}

func TestAuthOff(t *testing.T) {
	client := roomcellv1.NewRoomServiceClient(startServer(t, Options{}, &fakeBackend{}))
	if _, err := client.JoinRoom(testCtx(t), joinReq()); err != nil {
		t.Fatalf("no token configured, call without one: %v", err)
	}
}

func TestAccessLog(t *testing.T) {
	logs := &syncBuffer{}
	client := roomcellv1.NewRoomServiceClient(startServer(t, Options{Logger: newTextLogger(logs)}, &fakeBackend{}))
	ctx := metadata.AppendToOutgoingContext(testCtx(t), RequestIDHeader, "req-log-1")
	if _, err := client.JoinRoom(ctx, joinReq()); err != nil {
		t.Fatal(err)
	}
	bad := joinReq()
	bad.UserId = ""
	_, _ = client.JoinRoom(metadata.AppendToOutgoingContext(testCtx(t), RequestIDHeader, "req-log-2"), bad)
	log := logs.String()
	for _, want := range []string{
		"level=DEBUG msg=rpc method=/roomcell.v1.RoomService/JoinRoom code=OK",
		"request_id=req-log-1",
		"code=InvalidArgument",
		"request_id=req-log-2",
		"duration=",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("access log lacks %q:\n%s", want, log)
		}
	}
}

// fakeStream is just enough ServerStream for the stream interceptors.
type fakeStream struct {
	grpc.ServerStream
	ctx    context.Context
	header metadata.MD
}

func (s *fakeStream) Context() context.Context { return s.ctx }
func (s *fakeStream) SetHeader(md metadata.MD) error {
	s.header = metadata.Join(s.header, md)
	return nil
}

func TestStreamInterceptors(t *testing.T) {
	info := &grpc.StreamServerInfo{FullMethod: "/roomcell.v1.Test/Watch"}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(RequestIDHeader, "req-s1"))
	ss := &fakeStream{ctx: ctx}

	var seen string
	err := edge{discardLogger()}.stream(nil, ss, info, func(_ any, s grpc.ServerStream) error {
		seen = RequestIDFrom(s.Context())
		return nil
	})
	if err != nil || seen != "req-s1" {
		t.Fatalf("request id in stream ctx %q (err %v), want req-s1", seen, err)
	}
	if got := ss.header.Get(RequestIDHeader); len(got) != 1 || got[0] != "req-s1" {
		t.Fatalf("stream header %v, want req-s1", got)
	}

	_, recoverStream := recovery(discardLogger())
	err = recoverStream(nil, ss, info, func(any, grpc.ServerStream) error { panic("stream boom") })
	assertCode(t, err, codes.Internal)

	// A stream of a method in no table is refused even with a token;
	// a public one passes without.
	a := newTokenAuth(nil, []string{"tok"})
	authed := &fakeStream{ctx: metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer tok"))}
	err = gate{a}.stream(nil, authed, info, func(any, grpc.ServerStream) error { return nil })
	assertCode(t, err, codes.PermissionDenied)
	watch := &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch"}
	if err := (gate{a}).stream(nil, ss, watch, func(any, grpc.ServerStream) error { return nil }); err != nil {
		t.Fatalf("public stream without token: %v", err)
	}
}

func TestNewRequestIDIsValid(t *testing.T) {
	a, b := NewRequestID(), NewRequestID()
	if a == b {
		t.Fatalf("two request ids equal: %s", a)
	}
	if err := checkOptionalID("request_id", a); err != nil || len(a) > 64 {
		t.Fatalf("generated id %q fails its own check: %v", a, err)
	}
}
