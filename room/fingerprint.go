package room

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
)

// idFields are the request fields that name a call rather than say what
// it asks for: they are left out of the fingerprint.
var idFields = map[protoreflect.Name]bool{"command_id": true, "request_id": true}

// RequestHash fingerprints what rc asks for: SHA-256 (hex) of the
// deterministic protobuf encoding of the command, oneof case included,
// with command_id and request_id cleared, and without the traceparent (a
// retry is traced anew and is still the same request). It works from the message's
// descriptor, so a command type added to RoomCommand is covered without
// code here. Two requests that differ in any other field (type, operator,
// target, gift, count, seat, reason, ...) hash differently. A request that
// cannot be encoded (a string that is not UTF-8, from an in-process
// caller) is errclass.Invalid.
func RequestHash(rc *v1.RoomCommand) (string, error) {
	if b, ok := requestEncoding(rc); ok {
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:]), nil
	}
	return requestHashByClone(rc)
}

// requestHashByClone is RequestHash by its definition: a clone with the
// fields cleared, encoded. requestEncoding makes the same bytes without
// the clone and the reflection walk over it (a third of a fingerprint's
// cost, on every command); this answers what it does not handle.
func requestHashByClone(rc *v1.RoomCommand) (string, error) {
	c := proto.Clone(rc).(*v1.RoomCommand)
	c.Traceparent = ""
	m := c.ProtoReflect()
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil {
			return true
		}
		inner := v.Message()
		fields := inner.Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			if f := fields.Get(i); idFields[f.Name()] {
				inner.Clear(f)
			}
		}
		return true
	})
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return "", errclass.Invalidf("command cannot be encoded: %v", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// oneofCase is what requestEncoding needs of a case of the command oneof:
// its field number and the numbers of its request's id fields.
type oneofCase struct {
	num protowire.Number
	ids []protowire.Number
}

// oneofCases maps each case's generated wrapper type to its oneofCase,
// read from the descriptor once.
var oneofCases = func() map[reflect.Type]oneofCase {
	out := make(map[reflect.Type]oneofCase)
	fields := (&v1.RoomCommand{}).ProtoReflect().Descriptor().Oneofs().ByName("command").Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Message() == nil {
			continue
		}
		rc := &v1.RoomCommand{}
		m := rc.ProtoReflect()
		m.Set(fd, m.NewField(fd))
		c := oneofCase{num: fd.Number()}
		inner := fd.Message().Fields()
		for j := range inner.Len() {
			if f := inner.Get(j); idFields[f.Name()] {
				c.ids = append(c.ids, f.Number())
			}
		}
		out[reflect.TypeOf(rc.GetCommand())] = c
	}
	return out
}()

// requestEncoding is the encoding requestHashByClone hashes, made from the
// request's own deterministic encoding: fields are encoded in field
// number order, so leaving out the id fields' records is clearing them,
// and the command's only other field, the traceparent, is left out.
// ok is false for what it does not handle (an empty command, a case set
// to a nil request, a request that does not encode): the clone answers.
func requestEncoding(rc *v1.RoomCommand) ([]byte, bool) {
	c, ok := oneofCases[reflect.TypeOf(rc.GetCommand())]
	req := Request(rc)
	if !ok || req == nil || !req.ProtoReflect().IsValid() {
		return nil, false
	}
	inner, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return nil, false
	}
	kept := make([]byte, 0, len(inner))
	for b := inner; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, false
		}
		if !slices.Contains(c.ids, num) {
			kept = append(kept, b[:n+m]...)
		}
		b = b[n+m:]
	}
	out := protowire.AppendTag(make([]byte, 0, len(kept)+16), c.num, protowire.BytesType)
	out = protowire.AppendBytes(out, kept)
	return append(out, rc.ProtoReflect().GetUnknown()...), true
}
