package cluster

import (
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/ownership"
)

// placementName is the placement actor every member runs.
const placementName = "roomcell-placement"

// activationTimeout bounds one activation request to a shard's owner. A
// request to an owner that died is cut short sooner by the room client,
// which retries as soon as the shard changes hands.
const activationTimeout = time.Second

// lookup is the identity lookup: a grain lives on the node that owns its
// shard in the ownership table, and that node's placement actor activates
// it only while it holds the shard (disthash, the library's, activates on
// any request and places by a hash of the member view, so two nodes with
// different views both activate a room).
type lookup struct {
	table     ownership.Table
	c         *pcluster.Cluster
	placement *actor.PID
	startErr  error
}

func (l *lookup) Setup(c *pcluster.Cluster, _ []string, _ bool) {
	l.c = c
	l.placement, l.startErr = c.ActorSystem.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &placement{c: c, table: l.table, actors: map[string]grainMeta{}, props: map[string]*actor.Props{}}
	}), placementName)
	if l.startErr != nil {
		return
	}
	l.startErr = l.table.Start(c.ActorSystem.Address(), func(shards []int) {
		c.ActorSystem.Root.Send(l.placement, &shardsLost{shards: shards})
	})
}

func (l *lookup) Get(ci *pcluster.ClusterIdentity) *actor.PID {
	owner := l.table.Owner(ci.Identity)
	if owner == "" {
		return nil
	}
	res, err := l.c.ActorSystem.Root.RequestFuture(actor.NewPID(owner, placementName),
		&pcluster.ActivationRequest{ClusterIdentity: ci}, activationTimeout).Result()
	if err != nil {
		return nil
	}
	r, ok := res.(*pcluster.ActivationResponse)
	if !ok || r.Failed {
		return nil
	}
	return r.Pid
}

func (l *lookup) RemovePid(ci *pcluster.ClusterIdentity, pid *actor.PID) {
	l.c.MemberList.BroadcastEvent(&pcluster.ActivationTerminated{Pid: pid, ClusterIdentity: ci}, true)
}

func (l *lookup) Shutdown() {
	if l.placement != nil {
		_ = l.c.ActorSystem.Root.PoisonFuture(l.placement).Wait()
	}
}

// shardsLost: this node no longer owns these shards; stop their grains.
type shardsLost struct{ shards []int }

// stopGrains: stop every grain here (a rejoin or a drain).
type stopGrains struct{}

type grainMeta struct {
	id    *pcluster.ClusterIdentity
	pid   *actor.PID
	shard int
}

// placement activates and tracks this node's grains.
type placement struct {
	c      *pcluster.Cluster
	table  ownership.Table
	actors map[string]grainMeta
	// props holds one Props per kind, cloned once, whose OnInit gives the
	// grain being spawned the identity in spawning. The library's
	// WithClusterIdentity clones the kind's Props for every activation
	// (~450 bytes an active grain, kept for its life: issue 13). A spawn
	// runs its OnInit before it returns, on this actor's goroutine, so
	// spawning is always the grain's own.
	props    map[string]*actor.Props
	spawning *pcluster.ClusterIdentity
}

// propsOf returns kind's shared Props.
func (p *placement) propsOf(kind *pcluster.ActivatedKind) *actor.Props {
	props, ok := p.props[kind.Kind]
	if !ok {
		props = kind.Props.Clone(actor.WithOnInit(func(ctx actor.Context) {
			pcluster.SetClusterIdentity(ctx, p.spawning)
		}))
		p.props[kind.Kind] = props
	}
	return props
}

// grainOf returns the key of the grain pid, which this actor spawned with
// its identity as the name's prefix ("<placement>/<identity>$<n>"); false
// if the name does not read so.
func (p *placement) grainOf(self, pid *actor.PID) (string, bool) {
	name, ok := strings.CutPrefix(pid.Id, self.Id+"/")
	i := strings.LastIndexByte(name, '$')
	if !ok || i < 0 {
		return "", false
	}
	identity := name[:i]
	for kind := range p.props {
		key := kind + "/" + identity // ClusterIdentity.AsKey
		if meta, ok := p.actors[key]; ok && meta.pid.Equal(pid) {
			return key, true
		}
	}
	return "", false
}

// stopped forgets the grain pid once it has stopped.
func (p *placement) stopped(self, pid *actor.PID) {
	key, ok := p.grainOf(self, pid)
	if !ok {
		// Not a name this actor gave: find it the long way.
		for k, meta := range p.actors {
			if meta.pid.Equal(pid) {
				key, ok = k, true
				break
			}
		}
	}
	if !ok {
		return
	}
	meta := p.actors[key]
	delete(p.actors, key)
	if k := p.c.GetClusterKind(meta.id.Kind); k != nil {
		k.Dec()
	}
	p.c.MemberList.BroadcastEvent(&pcluster.ActivationTerminated{Pid: pid, ClusterIdentity: meta.id}, true)
}

func (p *placement) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *pcluster.ActivationRequest:
		ctx.Respond(p.activate(ctx, msg.ClusterIdentity))
	case *actor.Terminated:
		// Found by its name, not by a walk over every grain: a node that
		// passivates 100k rooms would otherwise walk 100k entries each.
		p.stopped(ctx.Self(), msg.Who)
	case *shardsLost:
		lost := map[int]bool{}
		for _, s := range msg.shards {
			lost[s] = true
		}
		for _, meta := range p.actors {
			if lost[meta.shard] {
				ctx.Poison(meta.pid)
			}
		}
	case *stopGrains:
		for _, meta := range p.actors {
			ctx.Poison(meta.pid)
		}
	case *actor.Stopping:
		futures := make([]*actor.Future, 0, len(p.actors))
		for _, meta := range p.actors {
			futures = append(futures, ctx.PoisonFuture(meta.pid))
		}
		for _, f := range futures {
			_ = f.Wait()
		}
	}
}

// activate answers an activation request: the grain if it is here, a new
// one if this node holds the shard, Failed otherwise (the requester
// retries once the table names the owner).
func (p *placement) activate(ctx actor.Context, ci *pcluster.ClusterIdentity) *pcluster.ActivationResponse {
	key := ci.AsKey()
	if meta, ok := p.actors[key]; ok {
		return &pcluster.ActivationResponse{Pid: meta.pid}
	}
	if _, ok := p.table.Hold(ci.Identity); !ok {
		return &pcluster.ActivationResponse{Failed: true}
	}
	kind := p.c.GetClusterKind(ci.Kind)
	if kind == nil {
		return &pcluster.ActivationResponse{Failed: true}
	}
	p.spawning = ci
	pid := ctx.SpawnPrefix(p.propsOf(kind), ci.Identity)
	p.spawning = nil
	kind.Inc()
	p.actors[key] = grainMeta{id: ci, pid: pid, shard: ownership.ShardOf(ci.Identity, p.table.Shards())}
	return &pcluster.ActivationResponse{Pid: pid}
}
