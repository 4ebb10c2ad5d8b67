package room

import (
	"crypto/sha256"
	"encoding/hex"

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
