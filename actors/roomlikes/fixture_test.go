package roomlikes

import (
	"fmt"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/roomgrain/graintest"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// Store is a room grain's store.
type Store = roomgrain.Store

// fixture is a graintest host whose rooms have the likes observer wired
// as cmd/roomcell wires it (its window deps.Config.LikeWindow); deps is
// what the next activation gets.
type fixture struct {
	h     *graintest.Host
	sys   *actor.ActorSystem
	store *memdb.Store
	deps  roomgrain.Deps
}

func newFixture(t testing.TB) *fixture {
	h := graintest.New(t)
	return &fixture{h: h, sys: h.Sys, store: h.Store, deps: h.Deps()}
}

// activate spawns one activation of the room with the deps as they are
// now.
func (f *fixture) activate(identity string) *actor.PID {
	d := f.deps
	d.Observers = append(append([]roomgrain.NewObserver(nil), d.Observers...), Observe(Config{Window: d.Config.LikeWindow}))
	return f.h.Activate(roomgrain.GrainProps(d), identity)
}

// to is where rc goes as the node's room client sends it: a like to the
// room's front once its likes opened one (roomgrain.Front), anything
// else (and the room's first like) to the grain.
func (f *fixture) to(pid *actor.PID, rc *v1.RoomCommand) *actor.PID {
	if rc.GetLikeRoom() != nil {
		return f.likesTo(pid)
	}
	return pid
}

// likesTo is where the room's likes go (its front once open).
func (f *fixture) likesTo(pid *actor.PID) *actor.PID { return roomgrain.Front(f.sys, pid) }

func (f *fixture) do(pid *actor.PID, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	return f.h.Do(f.to(pid, rc), rc)
}

func (f *fixture) mustDo(pid *actor.PID, rc *v1.RoomCommand) *v1.CommandReply {
	return f.h.MustDo(f.to(pid, rc), rc)
}

// replyOf reads a grain's answer to a request made without the host.
func replyOf(res any) (*v1.CommandReply, error) {
	r, ok := res.(*v1.RoomResponse)
	if !ok {
		return nil, fmt.Errorf("grain answered %T", res)
	}
	if r.Error != nil {
		return nil, roomgrain.ErrorOf(r.Error)
	}
	return r.Reply, nil
}

func rc(cmd any) *v1.RoomCommand {
	switch c := cmd.(type) {
	case *v1.CreateRoomRequest:
		return &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: c}}
	case *v1.JoinRoomRequest:
		return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: c}}
	case *v1.SendGiftRequest:
		return &v1.RoomCommand{Command: &v1.RoomCommand_SendGift{SendGift: c}}
	case *v1.GetRoomRequest:
		return &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: c}}
	}
	panic(fmt.Sprintf("rc: %T", cmd))
}

func rcCreate(cmdID, user string) *v1.RoomCommand {
	return rc(&v1.CreateRoomRequest{CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: user, Name: "Room One"})
}

func rcJoin(cmdID, user string) *v1.RoomCommand {
	return rc(&v1.JoinRoomRequest{CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: user})
}

func rcGift(cmdID, from, to string) *v1.RoomCommand {
	return rc(&v1.SendGiftRequest{CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: from, ToUserId: to, GiftId: "rose", GiftCount: 2})
}

func rcGet() *v1.RoomCommand { return rc(&v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}) }
