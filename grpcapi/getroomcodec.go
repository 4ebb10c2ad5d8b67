package grpcapi

import (
	"context"
	"sync/atomic"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/hyapp/roomcell/api/roomcellv1"
)

// A room answers GetRoom's first page from the reply it keeps until its
// next commit (actors/roomgrain, reads.go): the same reply, again and
// again, for a room read far more than it changes. Encoding its page of
// members (up to 100) was a tenth of a GetRoom's CPU. So the encoding is
// made once per reply the room hands out and kept beside it here, and
// eventsCodec sends those bytes. The key is the reply itself (its
// address, the entry holding it): a room's next commit makes a new reply,
// so a kept encoding is never of an older room than the reply answered.

// encodedGetRoom is a GetRoom answer with its encoding. Embedding the
// answer keeps it a proto.Message: any other codec marshals the answer.
type encodedGetRoom struct {
	*roomcellv1.GetRoomReply
	wire []byte
}

// getRoomWires keeps the encodings of recent GetRoom answers, one slot
// per hash of the reply they came from: a bounded cache without a lock,
// where a collision costs an encoding, never a wrong answer (the slot
// names its reply).
type getRoomWires struct {
	slots [64]atomic.Pointer[getRoomWire]
}

type getRoomWire struct {
	from *roomcellv1.CommandReply
	enc  *encodedGetRoom
}

// of is GetRoom's answer to a room's reply r, with its encoding.
func (c *getRoomWires) of(r *roomcellv1.CommandReply) *encodedGetRoom {
	a := uintptr(unsafe.Pointer(r))
	slot := &c.slots[(a>>5^a>>11)%uintptr(len(c.slots))]
	if w := slot.Load(); w != nil && w.from == r {
		return w.enc
	}
	enc := &encodedGetRoom{GetRoomReply: &roomcellv1.GetRoomReply{Room: r.GetRoom(), NextPageToken: r.GetNextPageToken()}}
	if b, err := proto.Marshal(enc.GetRoomReply); err == nil {
		enc.wire = b
		slot.Store(&getRoomWire{from: r, enc: enc})
	}
	return enc
}

// marshalGetRoom hands gRPC e's kept encoding itself, not a copy: a
// SliceBuffer's Free is a no-op, and gRPC only reads a message's bytes
// (into its frames), so one encoding serves every caller of the reply at
// once. A copy into a pooled buffer per call was ~1.5 µs of a GetRoom
// (the pool's get and put, the buffer's header).
func marshalGetRoom(e *encodedGetRoom) mem.BufferSlice {
	return mem.BufferSlice{mem.SliceBuffer(e.wire)}
}

// getRoomHandler is the generated handler of GetRoom but for its
// answer, an encodedGetRoom.
func getRoomHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(roomcellv1.GetRoomRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	s := srv.(*RoomServer)
	handler := func(ctx context.Context, req any) (any, error) {
		reply, err := s.getRoom(ctx, req.(*roomcellv1.GetRoomRequest))
		if err != nil {
			return nil, err
		}
		return s.getRoomWires.of(reply), nil
	}
	if interceptor == nil {
		return handler(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: roomcellv1.RoomService_GetRoom_FullMethodName}
	return interceptor(ctx, in, info, handler)
}
