package room

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// A retry of a command carries another trace (and may carry another
// request id); it must still be the same request, or a retried command
// would be refused as a reuse of its command_id. Any field that says what
// is asked must still change the hash.
func TestRequestHashIgnoresTraceparentOnly(t *testing.T) {
	join := func(user, traceparent, requestID string) *v1.RoomCommand {
		return &v1.RoomCommand{Traceparent: traceparent, Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
			CommandId: "c1", RequestId: requestID, AppCode: "app", RoomId: "r1", UserId: user}}}
	}
	hash := func(rc *v1.RoomCommand) string {
		t.Helper()
		h, err := RequestHash(rc)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := hash(join("u1", "", "req-1"))
	traced := join("u1", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "req-2")
	if got := hash(traced); got != base {
		t.Fatalf("traceparent changed the fingerprint: %s vs %s", got, base)
	}
	if traced.Traceparent == "" {
		t.Fatal("RequestHash cleared the caller's traceparent")
	}
	if hash(join("u2", "", "req-1")) == base {
		t.Fatal("another user hashed like the first")
	}
}

// fillMessage sets every field of m the protobuf way (scalars, enums,
// lists, maps and nested messages to depth 2) from r.
func fillMessage(m protoreflect.Message, r *rand.Rand, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && r.IntN(2) == 0 {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range r.IntN(3) {
				if fd.Message() != nil {
					if depth > 0 {
						e := l.NewElement()
						fillMessage(e.Message(), r, depth-1)
						l.Append(e)
					}
					continue
				}
				l.Append(scalarValue(fd, r))
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range r.IntN(3) {
				k := scalarValue(fd.MapKey(), r).MapKey()
				if fd.MapValue().Message() != nil {
					if depth > 0 {
						v := mp.NewValue()
						fillMessage(v.Message(), r, depth-1)
						mp.Set(k, v)
					}
					continue
				}
				mp.Set(k, scalarValue(fd.MapValue(), r))
			}
		case fd.Message() != nil:
			if depth > 0 {
				fillMessage(m.Mutable(fd).Message(), r, depth-1)
			}
		default:
			m.Set(fd, scalarValue(fd, r))
		}
	}
}

func scalarValue(fd protoreflect.FieldDescriptor, r *rand.Rand) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(r.IntN(vs.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(r.Int32N(1000) - 10)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(r.Int64N(1<<40) - 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(r.Uint32())
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(r.Uint64())
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(r.Float32())
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(r.Float64())
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fmt.Sprint("b", r.IntN(100))))
	}
	if r.IntN(4) == 0 {
		return protoreflect.ValueOfString("")
	}
	return protoreflect.ValueOfString(fmt.Sprint("s", r.IntN(1000)))
}

// The fingerprint made from the request's own encoding is byte for byte
// the one of its definition (a clone with the id fields and the
// traceparent cleared, encoded): on every case of the command oneof
// filled at random, with and without ids and a traceparent, with unknown
// fields on the command and its request, with ids that are not UTF-8
// (which the definition clears before encoding), and for a case set to a
// nil request. Fingerprints are stored with the commands they answered,
// so a retry after an upgrade must hash as before.
func TestRequestHashFromEncodingIsTheDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	fields := (&v1.RoomCommand{}).ProtoReflect().Descriptor().Oneofs().ByName("command").Fields()
	unknown := protowire.AppendString(protowire.AppendTag(nil, 9999, protowire.BytesType), "extra")
	fast := 0
	for round := range 20 {
		for i := range fields.Len() {
			fd := fields.Get(i)
			rc := &v1.RoomCommand{}
			m := rc.ProtoReflect()
			req := m.NewField(fd)
			fillMessage(req.Message(), r, 2)
			m.Set(fd, req)
			if round%3 == 0 {
				rc.Traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			}
			if round%4 == 1 {
				req.Message().SetUnknown(unknown)
				m.SetUnknown(unknown)
			}
			if round%5 == 2 {
				ids := req.Message().Descriptor().Fields()
				for j := range ids.Len() {
					if f := ids.Get(j); idFields[f.Name()] {
						req.Message().Set(f, protoreflect.ValueOfString("bad\xff"))
					}
				}
			}
			got, gerr := RequestHash(rc)
			want, werr := requestHashByClone(rc)
			if got != want || (gerr == nil) != (werr == nil) {
				t.Fatalf("round %d, case %s: hash %q (%v), the definition's %q (%v)", round, fd.Name(), got, gerr, want, werr)
			}
			if _, ok := requestEncoding(rc); ok {
				fast++
			}
		}
	}
	if fast < fields.Len()*15 {
		t.Fatalf("only %d of %d commands were fingerprinted from their encoding", fast, fields.Len()*20)
	}
	for i := range fields.Len() {
		rc := &v1.RoomCommand{}
		empty := reflect.New(reflect.TypeOf(func() *v1.RoomCommand {
			c := &v1.RoomCommand{}
			c.ProtoReflect().Set(fields.Get(i), c.ProtoReflect().NewField(fields.Get(i)))
			return c
		}().GetCommand()).Elem())
		reflect.ValueOf(rc).Elem().FieldByName("Command").Set(empty)
		if _, ok := requestEncoding(rc); ok {
			t.Fatalf("case %s set to a nil request was fingerprinted from an encoding", fields.Get(i).Name())
		}
	}
}
