package grpcapi

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/api/roomcellv1"
)

// randomReply is a reply of n events with every field varied: zero and
// negative numbers, empty and non-ASCII strings.
func randomReply(rng *rand.Rand, n int) *roomcellv1.ListRoomEventsReply {
	num := func() int64 {
		switch rng.IntN(5) {
		case 0:
			return 0
		case 1:
			return -rng.Int64N(1 << 40)
		}
		return rng.Int64N(1 << 50)
	}
	str := func() string {
		switch rng.IntN(4) {
		case 0:
			return ""
		case 1:
			return fmt.Sprintf(`{"user_id":"用户-%d","text":"é\n%d"}`, rng.IntN(1000), rng.Int())
		}
		return strings.Repeat("x", rng.IntN(300))
	}
	r := &roomcellv1.ListRoomEventsReply{NextAfterSeq: num(), HeadSeq: num()}
	for range n {
		r.Events = append(r.Events, &roomcellv1.RoomLogEvent{RoomSeq: num(), EventId: str(), EventType: str(),
			Payload: str(), CommandId: str(), CreatedAtMs: num()})
	}
	return r
}

// A reply sent from its events' kept encodings is byte for byte what the
// standard codec sends for the reply, so it decodes to an equal message;
// small and pooled buffers alike, and a reply with unknown fields.
func TestEventsCodecWritesWhatTheProtoCodecWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fast := eventsCodec{base: encoding.GetCodecV2(grpcproto.Name)}
	std := encoding.GetCodecV2(grpcproto.Name)
	for i := range 500 {
		reply := randomReply(rng, rng.IntN(4)+[]int{0, 10, 100, 1000}[i%4])
		if i%7 == 0 {
			reply.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), uint64(i)))
		}
		var wire [][]byte
		for _, e := range reply.Events {
			wire = append(wire, marshalEvent(e))
		}
		marshalsAsProto(t, fast, std, &encodedEvents{ListRoomEventsReply: reply, wire: wire}, reply, fmt.Sprintf("reply %d (%d events)", i, len(reply.Events)))
	}
}

// A page without an encoding for each event goes out through the
// standard codec.
func TestPageWithoutEveryEncodingIsMarshalled(t *testing.T) {
	reply := randomReply(rand.New(rand.NewPCG(7, 8)), 3)
	for _, wire := range [][][]byte{nil, {marshalEvent(reply.Events[0])}} {
		if got, ok := pageReply(roomfeed.EventsPage{Reply: reply, Wire: wire}).(*roomcellv1.ListRoomEventsReply); !ok || got != reply {
			t.Fatalf("%d encodings for %d events: answered %T", len(wire), len(reply.Events), got)
		}
	}
}

// ListRoomEvents sends the page's kept encodings, not a new encoding of
// its messages: the client decodes what the encodings say (here they
// differ from the messages on purpose). With honest encodings, over
// gRPC and through the HTTP gateway the client gets the reply itself.
func TestListRoomEventsSendsTheKeptEncodings(t *testing.T) {
	reply := randomReply(rand.New(rand.NewPCG(9, 10)), 100)
	e := &fakeEvents{
		list: func(*roomcellv1.ListRoomEventsRequest) (*roomcellv1.ListRoomEventsReply, error) { return reply, nil },
		wire: func(ev *roomcellv1.RoomLogEvent) []byte {
			kept := proto.Clone(ev).(*roomcellv1.RoomLogEvent)
			kept.Payload = "kept:" + kept.Payload
			return marshalEvent(kept)
		},
	}
	c := startEventsServer(t, Options{}, e, 10)
	got, err := c.ListRoomEvents(testCtx(t), &roomcellv1.ListRoomEventsRequest{AppCode: "a", RoomId: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != len(reply.Events) || got.HeadSeq != reply.HeadSeq || got.NextAfterSeq != reply.NextAfterSeq {
		t.Fatalf("got %d events to %d head %d", len(got.Events), got.NextAfterSeq, got.HeadSeq)
	}
	for i, ev := range got.Events {
		if ev.Payload != "kept:"+reply.Events[i].Payload {
			t.Fatalf("event %d: payload %q, not the kept encoding's", i, ev.Payload)
		}
	}
	e.wire = marshalEvent
	if got, err = c.ListRoomEvents(testCtx(t), &roomcellv1.ListRoomEventsRequest{AppCode: "a", RoomId: "r1"}); err != nil || !proto.Equal(got, reply) {
		t.Fatalf("honest encodings: a different reply (%v)", err)
	}
}

// The gateway's JSON of a reply sent from the kept encodings is the JSON
// of the reply (its payloads as objects: payloadsAsText turns them back).
func TestGatewayEventsJSONFromKeptEncodings(t *testing.T) {
	base, _ := startGateway(t)
	code, out, _ := httpDo(t, "GET", base+"/api/v1/rooms/events?app_code=app1&room_id=r1&after_room_seq=10", clientTok, "")
	if code != http.StatusOK {
		t.Fatalf("events: %d %s", code, out)
	}
	got := &roomcellv1.ListRoomEventsReply{}
	if err := protojson.Unmarshal(payloadsAsText(t, out), got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := gatewayEventsReply(); !proto.Equal(got, want) {
		t.Fatalf("gateway JSON %s, want %v", out, want)
	}
}

// WatchRoom's header reaches the client as soon as the watch is
// accepted, with the request id, on a room where nothing happens.
func TestWatchRoomHeaderBeforeAnyEvent(t *testing.T) {
	e := &fakeEvents{watch: func(ctx context.Context, after int64, send func(*roomcellv1.WatchRoomReply) error) error {
		<-ctx.Done() // an idle room
		return ctx.Err()
	}}
	c := startEventsServer(t, Options{}, e, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, RequestIDHeader, "req-w1")
	s, err := c.WatchRoom(ctx, &roomcellv1.WatchRoomRequest{AppCode: "a", RoomId: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	md, err := s.Header()
	if err != nil || ctx.Err() != nil {
		t.Fatalf("no header before any event: %v (%v)", err, ctx.Err())
	}
	if ids := md.Get(RequestIDHeader); len(ids) != 1 || ids[0] != "req-w1" {
		t.Fatalf("header %v, want the request id", md)
	}
}

// A WatchRoom message sent from its events' kept encodings is byte for
// byte what the standard codec sends for the reply (any seq, zero
// included, any number of events, unknown fields); a message without an
// encoding for each event goes out through the standard codec.
func TestWatchMessageFromKeptEncodingsIsWhatTheProtoCodecWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	fast := eventsCodec{base: encoding.GetCodecV2(grpcproto.Name)}
	std := encoding.GetCodecV2(grpcproto.Name)
	for i := range 300 {
		events := randomReply(rng, rng.IntN(3)+[]int{0, 1, 40, 600}[i%4]).Events
		reply := &roomcellv1.WatchRoomReply{RoomSeq: []int64{0, 1, 1 << 40, rng.Int64N(1 << 20)}[i%4], Events: events}
		if i%5 == 0 {
			reply.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 77, protowire.VarintType), uint64(i)))
		}
		var wire [][]byte
		for _, e := range events {
			wire = append(wire, marshalEvent(e))
		}
		m := watchReply(roomfeed.Message{Reply: reply, Wire: wire})
		if _, ok := m.(*encodedWatch); !ok && len(events) > 0 {
			t.Fatalf("message %d with every encoding: sent as %T", i, m)
		}
		marshalsAsProto(t, fast, std, m, reply, fmt.Sprintf("message %d (%d events)", i, len(events)))
	}
	reply := &roomcellv1.WatchRoomReply{RoomSeq: 3, Events: randomReply(rng, 2).Events}
	for _, wire := range [][][]byte{nil, {marshalEvent(reply.Events[0])}} {
		if got, ok := watchReply(roomfeed.Message{Reply: reply, Wire: wire}).(*roomcellv1.WatchRoomReply); !ok || got != reply {
			t.Fatalf("%d encodings for %d events: sent as %T", len(wire), len(reply.Events), got)
		}
	}
}

// marshalsAsProto: fast writes v byte for byte as std writes reply, and
// the bytes decode to a message equal to reply.
func marshalsAsProto(t *testing.T, fast, std encoding.CodecV2, v any, reply proto.Message, what string) {
	t.Helper()
	got, err := fast.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want, err := std.Marshal(reply)
	if err != nil {
		t.Fatal(err)
	}
	gb, wb := got.Materialize(), want.Materialize()
	got.Free()
	want.Free()
	if !bytes.Equal(gb, wb) {
		t.Fatalf("%s: %d bytes from the kept encodings, %d from proto", what, len(gb), len(wb))
	}
	back := reply.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(gb, back); err != nil || !proto.Equal(back, reply) {
		t.Fatalf("%s decodes to another message (%v)", what, err)
	}
}
