package kind

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
)

// bare maps a kind's Props (with the library's receiver middleware) to
// the same Props without it.
var bare sync.Map // *actor.Props -> *actor.Props

// New is pcluster.NewKind, whose Props carry the library's receiver
// middleware (it sends the grain its ClusterInit and clears a stopped
// grain from the pid cache), and it remembers props without it. A
// middleware gives every grain an extras block, ~250 bytes an active
// grain: roomcell's placement spawns the bare props and does
// the middleware's two jobs itself. Under the library's lookups the kind
// works as one from pcluster.NewKind.
func New(name string, props *actor.Props) *pcluster.Kind {
	k := pcluster.NewKind(name, props)
	bare.Store(k.Props, props)
	return k
}

// Bare returns the props New was given for a kind whose Props are p;
// false for a kind New did not make.
func Bare(p *actor.Props) (*actor.Props, bool) {
	v, ok := bare.Load(p)
	if !ok {
		return nil, false
	}
	return v.(*actor.Props), true
}
