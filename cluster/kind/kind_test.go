package kind

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
)

func TestBareIsWhatNewWasGiven(t *testing.T) {
	props := actor.PropsFromFunc(func(actor.Context) {})
	k := New("room", props)
	if k.Kind != "room" || k.Props == props {
		t.Fatalf("New = %s with props %p; want kind room with the middleware's own props, not %p", k.Kind, k.Props, props)
	}
	if got, ok := Bare(k.Props); !ok || got != props {
		t.Fatalf("Bare = %p, %v; want %p, true", got, ok, props)
	}
	if _, ok := Bare(props); ok {
		t.Fatal("Bare of the bare props themselves answered")
	}
	if _, ok := Bare(pcluster.NewKind("other", props).Props); ok {
		t.Fatal("Bare answered for a kind from the library's NewKind")
	}
}
