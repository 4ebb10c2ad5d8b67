package room

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// requestByProtoreflect is Request as the protobuf runtime answers it: the
// reference the field load must agree with.
func requestByProtoreflect(rc *v1.RoomCommand) proto.Message {
	r := rc.ProtoReflect()
	fd := r.WhichOneof(r.Descriptor().Oneofs().ByName("command"))
	if fd == nil {
		return nil
	}
	return r.Get(fd).Message().Interface()
}

// Request agrees with the protobuf runtime on every case of the command
// oneof, the ones added after this test included (the cases are read from
// the descriptor): the very message set, and for a case set to a nil
// message the same typed nil; nil for an empty command and a nil one.
func TestRequestReadsEveryCaseOfTheOneof(t *testing.T) {
	oneof := (&v1.RoomCommand{}).ProtoReflect().Descriptor().Oneofs().ByName("command")
	fields := oneof.Fields()
	if fields.Len() < 40 {
		t.Fatalf("the command oneof has %d cases; the descriptor was not read", fields.Len())
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		rc := &v1.RoomCommand{}
		r := rc.ProtoReflect()
		req := r.NewField(fd)
		r.Set(fd, req)
		got, want := Request(rc), requestByProtoreflect(rc)
		if got == nil || got != want || got != req.Message().Interface() {
			t.Fatalf("case %s: Request %T %p, the runtime %T %p", fd.Name(), got, got, want, want)
		}

		// The same case holding a nil message: the oneof's wrapper with
		// its field zeroed.
		empty := reflect.New(reflect.TypeOf(rc.GetCommand()).Elem())
		reflect.ValueOf(rc).Elem().FieldByName("Command").Set(empty)
		got, want = Request(rc), requestByProtoreflect(rc)
		if reflect.TypeOf(got) != reflect.TypeOf(want) || !reflect.ValueOf(got).IsNil() || !reflect.ValueOf(want).IsNil() {
			t.Fatalf("case %s set to nil: Request %T %v, the runtime %T %v", fd.Name(), got, got, want, want)
		}
	}
	if got := Request(&v1.RoomCommand{}); got != nil {
		t.Fatalf("empty command: Request %T", got)
	}
	if got := Request(nil); got != nil {
		t.Fatalf("nil command: Request %T", got)
	}
}
