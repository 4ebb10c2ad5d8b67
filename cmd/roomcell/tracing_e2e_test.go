package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/internal/tracing"
)

// One JoinRoom through the HTTP/JSON gateway with a caller's W3C
// traceparent is one trace: the gateway's span, the gRPC client and
// server spans of its pipe, the room client's, the grain's, the store
// append, the IM send and its Tencent call, each the child of the one
// before; the outbox row carries the grain span's trace context; the send
// span is linked to the command. A second join whose first send fails is
// sent again later (a sender retrying the row): every send of it, the
// failed one and the one that went through, is linked to that join's
// command. No IM message carries the trace context.
func TestTraceOfAJoinThroughGatewayGrainStoreAndIM(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	cfg, err := loadConfig(flags{dev: true, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodeID = "trace-e2e"
	cfg.Gateway.Addr = "127.0.0.1:0"
	app, err := start(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), true, testHooks{spans: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Shutdown)
	if !tracing.On() {
		t.Fatal("tracing is off with an exporter")
	}
	conn, err := grpc.NewClient(app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := ctxT(t)
	if _, err := v1.NewRoomServiceClient(conn).CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c0", AppCode: "app", RoomId: "traced", UserId: "owner", Name: "n"}); err != nil {
		t.Fatal(err)
	}

	join := func(commandID, user, traceID string) (eventID string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+app.gateway.Addr()+"/api/v1/rooms/user/join",
			strings.NewReader(`{"command_id":"`+commandID+`","app_code":"app","room_id":"traced","user_id":"`+user+`"}`))
		req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var reply struct {
			EventIDs []string `json:"event_ids"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &reply) != nil || len(reply.EventIDs) != 1 {
			t.Fatalf("join %s: %d %s", commandID, resp.StatusCode, body)
		}
		return reply.EventIDs[0]
	}
	// spansOf waits until the trace has an IM send that went through, and
	// returns its spans.
	spansOf := func(traceID string) tracetest.SpanStubs {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var out tracetest.SpanStubs
			sent := false
			for _, s := range exp.GetSpans() {
				if s.SpanContext.TraceID().String() == traceID {
					out = append(out, s)
					sent = sent || (s.Name == "im.send_group_msg" && s.Status.Code != codes.Error)
				}
			}
			if sent {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("trace %s: no IM send that went through within 10s; spans %v", traceID, names(out))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	eventID := join("j1", "u1", traceID)
	spans := spansOf(traceID)
	one := func(name string, kind trace.SpanKind) tracetest.SpanStub {
		t.Helper()
		var found []tracetest.SpanStub
		for _, s := range spans {
			if s.Name == name && (kind == trace.SpanKindUnspecified || s.SpanKind == kind) {
				found = append(found, s)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d spans %q (%v) in the trace, want 1; spans %v", len(found), name, kind, names(spans))
		}
		return found[0]
	}
	childOf := func(child, parent tracetest.SpanStub) {
		t.Helper()
		if child.Parent.SpanID() != parent.SpanContext.SpanID() {
			t.Fatalf("%s's parent is %s, want %s (%s)", child.Name, child.Parent.SpanID(), parent.Name, parent.SpanContext.SpanID())
		}
	}
	gateway := one("gateway POST", trace.SpanKindServer)
	if gateway.Parent.SpanID().String() != "00f067aa0ba902b7" || !gateway.Parent.IsRemote() {
		t.Fatalf("gateway span's parent %v, want the caller's traceparent", gateway.Parent)
	}
	pipe := one("roomcell.v1.RoomService/JoinRoom", trace.SpanKindClient)
	edge := one("roomcell.v1.RoomService/JoinRoom", trace.SpanKindServer)
	command := one("room.command", trace.SpanKindClient)
	grain := one("room.grain", trace.SpanKindServer)
	store := one("store.append", trace.SpanKindClient)
	send := one("im.send_group_msg", trace.SpanKindProducer)
	imCall := one("tencentim "+tencentim.APISendGroupMsg, trace.SpanKindClient)
	childOf(pipe, gateway)
	childOf(edge, pipe)
	childOf(command, edge)
	childOf(grain, command)
	childOf(store, grain)
	childOf(send, grain)
	childOf(imCall, send)
	if len(send.Links) != 1 || send.Links[0].SpanContext.SpanID() != grain.SpanContext.SpanID() {
		t.Fatalf("send links %v, want the grain span %s", send.Links, grain.SpanContext.SpanID())
	}
	row, err := app.store.GetOutbox(ctx, eventID)
	if err != nil {
		t.Fatal(err)
	}
	if want := "00-" + traceID + "-" + grain.SpanContext.SpanID().String() + "-01"; row.Envelope.TraceParent != want {
		t.Fatalf("outbox row traceparent %q, want %q", row.Envelope.TraceParent, want)
	}

	// The second join's first send fails; a sender sends the row again.
	const retriedID = "a3ce929d0e0e47364bf92f3577b34da6"
	app.fakeIM.FailNext(1, 20004, tencentim.APISendGroupMsg)
	join("j2", "u2", retriedID)
	spans = spansOf(retriedID)
	grain = one("room.grain", trace.SpanKindServer)
	var failed, ok int
	for _, s := range spans {
		if s.Name != "im.send_group_msg" {
			continue
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != grain.SpanContext.SpanID() {
			t.Fatalf("a send of the retried row links %v, want the grain span %s", s.Links, grain.SpanContext.SpanID())
		}
		if s.Status.Code == codes.Error {
			failed++
		} else {
			ok++
		}
	}
	if failed < 1 || ok != 1 {
		t.Fatalf("sends of the retried row: %d failed, %d through; want at least 1 and exactly 1", failed, ok)
	}
	for _, m := range app.fakeIM.Messages() {
		if strings.Contains(m.Data, "traceparent") || strings.Contains(m.Data, traceID) {
			t.Fatalf("an IM message carries the trace context: %s", m.Data)
		}
	}
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name + "/" + s.SpanKind.String()
	}
	return out
}
