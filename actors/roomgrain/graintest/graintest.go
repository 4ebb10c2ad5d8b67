// Package graintest hosts room grains for the tests of the packages that
// attach to them (observers: departures, seat deadlines): grains spawned
// from GrainProps on an actor system of the test's own, as the cluster's
// placement would, over a go-memdb store, and the room commands they are
// sent.
package graintest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// Host is one node's actor system and the store its rooms share.
type Host struct {
	t     testing.TB
	Sys   *actor.ActorSystem
	Store *memdb.Store
}

// New makes a host, shut down when the test ends.
func New(t testing.TB) *Host {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	return &Host{t: t, Sys: sys, Store: memdb.New()}
}

// Deps is what a test's grains share: h's store, a publisher that takes
// every event, free gifts, the default room config, and observers.
func (h *Host) Deps(observers ...roomgrain.NewObserver) roomgrain.Deps {
	return roomgrain.Deps{Store: h.Store, Publisher: Accepting{}, Gifts: roomgrain.FreeGifts(1),
		Config: configs.Default().Room, Observers: observers}
}

// Activate spawns one activation of the room identity from props and
// sends it ClusterInit.
func (h *Host) Activate(props *actor.Props, identity string) *actor.PID {
	pid := h.Sys.Root.Spawn(props)
	h.Sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: identity, Kind: roomgrain.Kind}})
	return pid
}

// Do sends rc and returns the grain's answer.
func (h *Host) Do(pid *actor.PID, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	h.t.Helper()
	res, err := h.Sys.Root.RequestFuture(pid, rc, 5*time.Second).Result()
	if err != nil {
		h.t.Fatalf("grain did not answer: %v", err)
	}
	r, ok := res.(*v1.RoomResponse)
	if !ok {
		h.t.Fatalf("grain answered %T", res)
	}
	if r.Error != nil {
		return nil, roomgrain.ErrorOf(r.Error)
	}
	return r.Reply, nil
}

// MustDo is Do, failing the test on an error.
func (h *Host) MustDo(pid *actor.PID, rc *v1.RoomCommand) *v1.CommandReply {
	h.t.Helper()
	r, err := h.Do(pid, rc)
	if err != nil {
		h.t.Fatalf("command failed: %v", err)
	}
	return r
}

// Accepting is a publisher that takes every event.
type Accepting struct{}

func (Accepting) PublishRoomEvent(context.Context, persistence.Envelope) error { return nil }
