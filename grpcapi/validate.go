package grpcapi

import (
	"errors"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hyapp/roomcell/room"
)

// Room commands are checked by the room's own code (room.CheckClientCommand,
// called by RoomServer) before they reach a grain; the checks here are for
// the other services. Every error names its field.

// checkOptionalID accepts empty: an empty request_id is filled from the
// interceptor.
func checkOptionalID(field, v string) error {
	if v == "" {
		return nil
	}
	return room.CheckID(field, v)
}

// The protobuf runtime refuses a string field holding invalid UTF-8 while
// decoding, and gRPC turns every decode failure into Internal before an
// interceptor or handler runs. For requests whose handler validates every
// string, the server codec instead decodes such fields as they are, so the
// handler answers InvalidArgument naming the field.

// validatedMessages holds the request types whose handlers check UTF-8;
// filled by registerValidated from init functions only.
var validatedMessages = map[protoreflect.FullName]bool{}

func registerValidated(msgs ...proto.Message) {
	for _, m := range msgs {
		validatedMessages[m.ProtoReflect().Descriptor().FullName()] = true
	}
}

// serverCodec is the proto codec with the one fallback described above.
type serverCodec struct{ base encoding.CodecV2 }

func (c serverCodec) Name() string                           { return c.base.Name() }
func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	if err == nil || !isInvalidUTF8(err) {
		return err
	}
	m, ok := v.(proto.Message)
	if !ok || !validatedMessages[m.ProtoReflect().Descriptor().FullName()] {
		return err
	}
	if unmarshalRawStrings(data.Materialize(), m) != nil {
		return err
	}
	return nil
}

func isInvalidUTF8(err error) bool {
	var u interface{ InvalidUTF8() bool }
	return errors.As(err, &u) && u.InvalidUTF8()
}

// unmarshalRawStrings decodes b into m, taking the top-level string fields
// byte for byte. Invalid UTF-8 deeper down (nested messages) still fails.
func unmarshalRawStrings(b []byte, m proto.Message) error {
	type rawString struct {
		fd protoreflect.FieldDescriptor
		v  string
	}
	fields := m.ProtoReflect().Descriptor().Fields()
	var raws []rawString
	rest := make([]byte, 0, len(b))
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[n:])
		if vn < 0 {
			return protowire.ParseError(vn)
		}
		fd := fields.ByNumber(num)
		if fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsMap() && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			raws = append(raws, rawString{fd, string(v)})
		} else {
			rest = append(rest, b[:n+vn]...)
		}
		b = b[n+vn:]
	}
	if err := proto.Unmarshal(rest, m); err != nil {
		return err
	}
	r := m.ProtoReflect()
	for _, s := range raws {
		if s.fd.IsList() {
			r.Mutable(s.fd).List().Append(protoreflect.ValueOfString(s.v))
		} else {
			r.Set(s.fd, protoreflect.ValueOfString(s.v))
		}
	}
	return nil
}
