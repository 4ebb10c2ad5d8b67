package grpcapi

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// gRPC turns every codec error into Internal before any interceptor or
// handler runs, so a garbage body or invalid UTF-8 in a wallet or admin
// request would answer "a bug on our side". badBodyCodec instead decodes
// such a body as an empty message carrying the decode error in an unknown
// field that no roomcell message uses, and the gate interceptor (after
// auth, so an anonymous caller still learns nothing) answers
// InvalidArgument for it. One place, every service.

// badBodyField is the largest field number protobuf allows; no roomcell
// message comes near it.
const badBodyField protowire.Number = protowire.MaxValidNumber

type badBodyCodec struct{ base encoding.CodecV2 }

func (c badBodyCodec) Name() string                           { return c.base.Name() }
func (c badBodyCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c badBodyCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	proto.Reset(m)
	mark := protowire.AppendTag(nil, badBodyField, protowire.BytesType)
	mark = protowire.AppendString(mark, err.Error())
	m.ProtoReflect().SetUnknown(mark)
	return nil
}

// badBodyError returns the decode error badBodyCodec left in req, or nil.
func badBodyError(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	b := m.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		if num == badBodyField && typ == protowire.BytesType {
			msg, _ := protowire.ConsumeString(b[n:])
			return status.Error(codes.InvalidArgument, "request body is not a valid message: "+msg)
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[n:])
		if vn < 0 {
			return nil
		}
		b = b[n+vn:]
	}
	return nil
}

type badBodyServerStream struct{ grpc.ServerStream }

func (s badBodyServerStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return badBodyError(m)
}
