package grpcapi

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/hyapp/roomcell/actors/roomfeed"
	"github.com/hyapp/roomcell/api/roomcellv1"
)

// A ListRoomEvents reply is ~100 events: encoding them was most of the
// server's CPU per read, for messages the room had already encoded once
// at commit (actors/roomgrain's event tail keeps each event's encoding). So
// the reply goes out as those bytes: ListRoomEvents' handler answers an
// encodedEvents, and eventsCodec writes the kept encodings with the
// reply's other fields around them, byte for byte what proto.Marshal
// makes of the reply. Clients, the HTTP gateway (a gRPC client of this
// server) and every other message see the standard codec.

// encodedEvents is a ListRoomEvents reply with its events' encodings
// (wire[i] encodes Events[i]). Embedding the reply keeps it a
// proto.Message: any other codec marshals the reply itself.
type encodedEvents struct {
	*roomcellv1.ListRoomEventsReply
	wire [][]byte
}

// eventsCodec sends an encodedEvents from its kept encodings and leaves
// everything else to base.
type eventsCodec struct{ base encoding.CodecV2 }

func (c eventsCodec) Name() string { return c.base.Name() }

func (c eventsCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

func (c eventsCodec) Marshal(v any) (mem.BufferSlice, error) {
	if w, ok := v.(*encodedWatch); ok {
		return marshalWatch(w), nil
	}
	if w, ok := v.(*framedWatch); ok {
		return marshalFramed(w), nil
	}
	if g, ok := v.(*encodedGetRoom); ok {
		if g.wire == nil {
			return c.base.Marshal(g.GetRoomReply)
		}
		return marshalGetRoom(g), nil
	}
	e, ok := v.(*encodedEvents)
	if !ok || e.ListRoomEventsReply == nil || len(e.wire) != len(e.Events) {
		if ok && e.ListRoomEventsReply != nil {
			v = e.ListRoomEventsReply
		}
		return c.base.Marshal(v)
	}
	size := encodedSize(e)
	if mem.IsBelowBufferPoolingThreshold(size) {
		return mem.BufferSlice{mem.SliceBuffer(appendEncoded(make([]byte, 0, size), e))}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	*buf = appendEncoded((*buf)[:0], e)
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// The reply's field numbers (api/roomcellv1/room.proto).
const (
	replyEventsField protowire.Number = 1
	replyNextField   protowire.Number = 2
	replyHeadField   protowire.Number = 3
)

func encodedSize(e *encodedEvents) int {
	n := len(e.ProtoReflect().GetUnknown())
	for _, w := range e.wire {
		n += protowire.SizeTag(replyEventsField) + protowire.SizeBytes(len(w))
	}
	if v := e.NextAfterSeq; v != 0 {
		n += protowire.SizeTag(replyNextField) + protowire.SizeVarint(uint64(v))
	}
	if v := e.HeadSeq; v != 0 {
		n += protowire.SizeTag(replyHeadField) + protowire.SizeVarint(uint64(v))
	}
	return n
}

// appendEncoded appends the reply as proto.Marshal writes it: fields in
// number order, zero scalars left out, unknown fields last.
func appendEncoded(b []byte, e *encodedEvents) []byte {
	for _, w := range e.wire {
		b = protowire.AppendTag(b, replyEventsField, protowire.BytesType)
		b = protowire.AppendBytes(b, w)
	}
	if v := e.NextAfterSeq; v != 0 {
		b = protowire.AppendTag(b, replyNextField, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v))
	}
	if v := e.HeadSeq; v != 0 {
		b = protowire.AppendTag(b, replyHeadField, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v))
	}
	return append(b, e.ProtoReflect().GetUnknown()...)
}

// encodedWatch is a WatchRoom message with its events' encodings
// (wire[i] encodes Events[i]), made once for every watcher of the room:
// a watcher's message costs a copy of them, not their encoding.
type encodedWatch struct {
	*roomcellv1.WatchRoomReply
	wire [][]byte
}

// The WatchRoomReply's field numbers (api/roomcellv1/room.proto).
const (
	watchSeqField    protowire.Number = 1
	watchEventsField protowire.Number = 2
)

// watchReply is what WatchRoom sends for m.
func watchReply(m roomfeed.Message) any {
	if m.Wire == nil || len(m.Wire) != len(m.Reply.Events) {
		return m.Reply
	}
	return &encodedWatch{WatchRoomReply: m.Reply, wire: m.Wire}
}

// marshalWatch writes w as proto.Marshal writes its reply: fields in
// number order, a zero seq left out, unknown fields last.
func marshalWatch(w *encodedWatch) mem.BufferSlice {
	unknown := w.ProtoReflect().GetUnknown()
	size := len(unknown)
	if w.RoomSeq != 0 {
		size += protowire.SizeTag(watchSeqField) + protowire.SizeVarint(uint64(w.RoomSeq))
	}
	for _, e := range w.wire {
		size += protowire.SizeTag(watchEventsField) + protowire.SizeBytes(len(e))
	}
	fill := func(b []byte) []byte {
		if w.RoomSeq != 0 {
			b = protowire.AppendTag(b, watchSeqField, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(w.RoomSeq))
		}
		for _, e := range w.wire {
			b = protowire.AppendTag(b, watchEventsField, protowire.BytesType)
			b = protowire.AppendBytes(b, e)
		}
		return append(b, unknown...)
	}
	// Not from gRPC's buffer pool: it hands out its size classes cleared
	// whole (a 40 KB batch cleared a 1 MB buffer), which cost more than
	// the message itself.
	return mem.BufferSlice{mem.SliceBuffer(fill(make([]byte, 0, size)))}
}

// framedWatch is a WatchRoom message as the node framed it: its seq and
// its events field in pieces shared by every watcher of the room
// (roomfeed.Frames). It is no proto.Message, so no other codec can send
// it as something else.
type framedWatch struct{ roomfeed.Frames }

// marshalFramed writes w as proto.Marshal writes the reply it stands for
// (room_seq, then the events): a few bytes of its own and the shared
// pieces, none of them copied (gRPC only reads a message's buffers).
func marshalFramed(w *framedWatch) mem.BufferSlice {
	out := make(mem.BufferSlice, 0, 1+len(w.Events))
	if w.RoomSeq != 0 {
		var head []byte
		head = protowire.AppendTag(make([]byte, 0, 1+protowire.SizeVarint(uint64(w.RoomSeq))), watchSeqField, protowire.VarintType)
		out = append(out, mem.SliceBuffer(protowire.AppendVarint(head, uint64(w.RoomSeq))))
	}
	for _, p := range w.Events {
		if len(p) > 0 {
			out = append(out, mem.SliceBuffer(p))
		}
	}
	return out
}

// pageReply is what ListRoomEvents' handler hands gRPC for a page.
func pageReply(p roomfeed.EventsPage) any {
	if p.Wire == nil || len(p.Wire) != len(p.Reply.Events) {
		return p.Reply
	}
	return &encodedEvents{ListRoomEventsReply: p.Reply, wire: p.Wire}
}

// RegisterRoomService registers s on srv as RoomService, its
// ListRoomEvents replies sent from the events' kept encodings and its
// GetRoom answers from theirs (getroomcodec.go).
func RegisterRoomService(srv *grpc.Server, s *RoomServer) {
	desc := roomcellv1.RoomService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i := range desc.Methods {
		switch desc.Methods[i].MethodName {
		case "ListRoomEvents":
			desc.Methods[i].Handler = listRoomEventsHandler
		case "GetRoom":
			desc.Methods[i].Handler = getRoomHandler
		}
	}
	srv.RegisterService(&desc, s)
}

// listRoomEventsHandler is the generated handler of ListRoomEvents but
// for its answer, an encodedEvents when the page has encodings.
func listRoomEventsHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(roomcellv1.ListRoomEventsRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	s := srv.(*RoomServer)
	handler := func(ctx context.Context, req any) (any, error) {
		p, err := s.listRoomEvents(ctx, req.(*roomcellv1.ListRoomEventsRequest))
		if err != nil {
			return nil, err
		}
		return pageReply(p), nil
	}
	if interceptor == nil {
		return handler(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: roomcellv1.RoomService_ListRoomEvents_FullMethodName}
	return interceptor(ctx, in, info, handler)
}
