package grpcapi

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/api/roomcellv1"
)

// framesOf is reply's events field as a node frames it, cut into pieces
// at random places (a batch joins runs of the feed's arena; a piece may
// end inside an event).
func framesOf(rng *rand.Rand, reply *roomcellv1.WatchRoomReply) roomfeed.Frames {
	var field []byte
	for _, e := range reply.Events {
		field = protowire.AppendTag(field, 2, protowire.BytesType)
		field = protowire.AppendBytes(field, marshalEvent(e))
	}
	fr := roomfeed.Frames{RoomSeq: reply.RoomSeq, Count: len(reply.Events)}
	for len(field) > 0 {
		n := min(len(field), 1+rng.IntN(2*len(field)))
		fr.Events = append(fr.Events, field[:n:n])
		field = field[n:]
	}
	if rng.IntN(3) == 0 {
		fr.Events = append(fr.Events, nil) // an empty piece writes nothing
	}
	return fr
}

// A framed WatchRoom message is byte for byte what the standard codec
// sends for the reply it stands for (any seq, zero included, any number
// of events, any cut into pieces); the standard codec refuses one, so no
// codec but the server's sends it as something else.
func TestFramedWatchIsWhatTheProtoCodecWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	fast := eventsCodec{base: encoding.GetCodecV2(grpcproto.Name)}
	std := encoding.GetCodecV2(grpcproto.Name)
	for i := range 400 {
		reply := &roomcellv1.WatchRoomReply{RoomSeq: []int64{0, 1, 1 << 40, rng.Int64N(1 << 20)}[i%4],
			Events: randomReply(rng, rng.IntN(3)+[]int{0, 1, 40, 600}[i%4]).Events}
		marshalsAsProto(t, fast, std, &framedWatch{framesOf(rng, reply)}, reply, fmt.Sprintf("message %d (%d events)", i, len(reply.Events)))
	}
	if _, err := std.Marshal(&framedWatch{roomfeed.Frames{RoomSeq: 1}}); err == nil {
		t.Fatal("the standard codec sent a framed message")
	}
}

// framesEvents is a RoomEvents whose watch sends frames (as the node's
// Watcher does).
type framesEvents struct {
	fakeEvents
	frames func(send func(roomfeed.Frames) error) error
}

func (f *framesEvents) WatchFrames(ctx context.Context, _, _ string, _ int64, _ bool, accepted func() error, send func(roomfeed.Frames) error) error {
	if err := accepted(); err != nil {
		return err
	}
	if err := f.frames(send); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

// Over gRPC, a client of WatchRoom decodes each framed message to the
// reply it stands for, in order.
func TestWatchRoomSendsFramesAClientDecodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	var want []*roomcellv1.WatchRoomReply
	for i := range 60 {
		want = append(want, &roomcellv1.WatchRoomReply{RoomSeq: int64(i + 1), Events: randomReply(rng, rng.IntN(40)).Events})
	}
	e := &framesEvents{frames: func(send func(roomfeed.Frames) error) error {
		for _, r := range want {
			if err := send(framesOf(rng, r)); err != nil {
				return err
			}
		}
		return nil
	}}
	c := startEventsServer(t, Options{}, e, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.WatchRoom(ctx, &roomcellv1.WatchRoomRequest{AppCode: "a", RoomId: "r1", Batch: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got, err := s.Recv()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !proto.Equal(got, w) {
			t.Fatalf("message %d: got seq %d with %d events, want seq %d with %d", i, got.RoomSeq, len(got.Events), w.RoomSeq, len(w.Events))
		}
	}
}
