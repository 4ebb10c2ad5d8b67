package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/cluster/kind"
	"github.com/hyapp/roomcell/configs"
)

// initCounter is a grain that answers with its identity and how many
// ClusterInits it has had.
type initCounter struct {
	identity string
	inits    int
	stopped  func(string)
}

func (a *initCounter) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *pcluster.ClusterInit:
		a.identity = msg.Identity.Identity
		a.inits++
	case *wrapperspb.StringValue:
		if msg.Value == "stop" {
			ctx.Respond(wrapperspb.String("stopping"))
			ctx.Poison(ctx.Self())
			return
		}
		ctx.Respond(wrapperspb.String(fmt.Sprintf("%s inits=%d", a.identity, a.inits)))
	case *actor.Stopped:
		a.stopped(a.identity)
	}
}

// A kind from package kind (bare props: the placement sends the
// ClusterInit and clears the pid cache) and one from the library's
// NewKind (its middleware does) both get exactly one ClusterInit with
// their identity, before any request, and leave the pid cache when they
// stop; a request after that activates a new grain.
func TestPlacementServesBothKindMakers(t *testing.T) {
	var mu sync.Mutex
	stops := map[string]int{}
	props := actor.PropsFromProducer(func() actor.Actor {
		return &initCounter{stopped: func(id string) { mu.Lock(); stops[id]++; mu.Unlock() }}
	})
	cfg := configs.Default().Cluster
	cfg.Port = 0
	m, err := cluster.Start(cluster.Options{Config: cfg, NodeID: "kinds",
		Kinds: []*pcluster.Kind{kind.New("bare", props), pcluster.NewKind("library", props)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(false) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	ask := func(identity, k, q string) string {
		t.Helper()
		res, err := m.Cluster.Request(identity, k, wrapperspb.String(q))
		if err != nil {
			t.Fatalf("%s/%s %q: %v", k, identity, q, err)
		}
		return res.(*wrapperspb.StringValue).Value
	}
	for _, k := range []string{"bare", "library"} {
		for i := range 20 {
			id := fmt.Sprintf("app/%s-%d", k, i)
			for range 3 {
				if got, want := ask(id, k, "who"), id+" inits=1"; got != want {
					t.Fatalf("%s/%s answered %q, want %q", k, id, got, want)
				}
			}
			active := m.Activations(k)
			ask(id, k, "stop")
			deadline := time.Now().Add(5 * time.Second)
			for {
				_, cached := m.Cluster.PidCache.Get(id, k)
				mu.Lock()
				n := stops[id]
				mu.Unlock()
				if n == 1 && !cached && m.Activations(k) == active-1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s/%s after stop: %d stops, pid cached %v, %d activations; want 1, false, %d", k, id, n, cached, m.Activations(k), active-1)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if got, want := ask(id, k, "who"), id+" inits=1"; got != want {
				t.Fatalf("%s/%s reactivated answered %q, want %q", k, id, got, want)
			}
		}
	}
}
