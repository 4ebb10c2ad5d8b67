package room_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

// Decoding reuses a pooled command: a decode must carry only its own
// request's fields, never a field an earlier decode (of any type, on any
// goroutine) left behind, and must not share the pooled value with the
// caller.
func TestCommandFromProtoLeavesNothingBehind(t *testing.T) {
	create := func(i int) *v1.RoomCommand {
		return &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
			CommandId: fmt.Sprint("c", i), AppCode: "app", RoomId: fmt.Sprint("r", i), UserId: fmt.Sprint("u", i),
			Name: fmt.Sprint("name", i), MicSeats: 8, AdminUserIds: []string{fmt.Sprint("a", i)}, Tags: []string{"t"},
			Category: "music", CoverUrl: "https://x/c.png", Visibility: "public",
		}}}
	}
	join := func(i int) *v1.RoomCommand {
		return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
			CommandId: fmt.Sprint("j", i), AppCode: "app", RoomId: fmt.Sprint("r", i), UserId: fmt.Sprint("v", i)}}}
	}
	wantJoin := func(i int) room.Command {
		return room.Command{Type: room.CmdJoinRoom, CommandID: fmt.Sprint("j", i), AppCode: "app", RoomID: fmt.Sprint("r", i),
			UserID: fmt.Sprint("v", i), NowMs: 7}
	}
	first, ok := room.CommandFromProto(create(0), 7)
	if !ok || first.Name != "name0" || len(first.Admins) != 1 || first.Admins[0] != "a0" {
		t.Fatalf("create decoded as %+v (ok %v)", first, ok)
	}
	if got := mustDecode(t, join(0)); !reflect.DeepEqual(got, wantJoin(0)) {
		t.Fatalf("join after a create decoded as %+v, want %+v", got, wantJoin(0))
	}
	if first.Name != "name0" || first.Admins[0] != "a0" || first.Category != "music" {
		t.Fatalf("the first decode changed under a later one: %+v", first)
	}

	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 500 {
				i := g*1000 + n
				c, _ := room.CommandFromProto(create(i), 7)
				if c.Name != fmt.Sprint("name", i) || c.RoomID != fmt.Sprint("r", i) || c.Admins[0] != fmt.Sprint("a", i) {
					errs <- fmt.Sprintf("create %d decoded as %+v", i, c)
					return
				}
				j, _ := room.CommandFromProto(join(i), 7)
				if !reflect.DeepEqual(j, wantJoin(i)) {
					errs <- fmt.Sprintf("join %d decoded as %+v", i, j)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func mustDecode(t *testing.T, rc *v1.RoomCommand) room.Command {
	t.Helper()
	c, ok := room.CommandFromProto(rc, 7)
	if !ok {
		t.Fatalf("%v did not decode", rc)
	}
	return c
}
