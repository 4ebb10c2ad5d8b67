package cluster

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/cluster/kind"
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
	table ownership.Table
	log   *slog.Logger
	// stopping is the member's (2: stopped); nil in tests without one.
	stopping  *atomic.Int32
	c         *pcluster.Cluster
	placement *actor.PID
	startErr  error
}

func (l *lookup) Setup(c *pcluster.Cluster, _ []string, _ bool) {
	l.c = c
	l.placement, l.startErr = c.ActorSystem.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &placement{c: c, table: l.table, stopping: l.stopping, log: l.log, actors: map[string]grainMeta{}, props: map[string]kindProps{}}
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
		l.logger().Warn("grain activation request to its owner failed", "identity", ci.Identity, "owner", owner, "error", err)
		return nil
	}
	r, ok := res.(*pcluster.ActivationResponse)
	if !ok || r.Failed {
		l.logger().Warn("grain activation refused by the node the table names its owner", "identity", ci.Identity, "owner", owner, "error", errActivationRefused)
		return nil
	}
	return r.Pid
}

// errActivationRefused keys the refusal's log line (one outage, one key).
var errActivationRefused = errors.New("activation refused: the owner does not hold the shard")

func (l *lookup) logger() *slog.Logger {
	if l.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.log
}

func (l *lookup) RemovePid(ci *pcluster.ClusterIdentity, pid *actor.PID) {
	l.c.MemberList.BroadcastEvent(&pcluster.ActivationTerminated{Pid: pid, ClusterIdentity: ci}, true)
}

func (l *lookup) Shutdown() {
	if l.placement != nil {
		_ = l.c.ActorSystem.Root.PoisonFuture(l.placement).Wait()
	}
}

// barrier is answered once the placement has handled every message
// before it: what it did so far happens before the caller goes on.
type barrier struct{}

// settle waits for the placement's barrier (at most 5 s): the member's
// crash-like stop calls it after marking itself stopped, so the
// placement's reads of Proto.Actor's member list, which is not safe to
// read while the provider rewrites it, happen before the provider goes,
// and the grains stopping after it see the member stopped and broadcast
// nothing.
func (l *lookup) settle() {
	if l.placement != nil && l.c != nil {
		_, _ = l.c.ActorSystem.Root.RequestFuture(l.placement, barrier{}, 5*time.Second).Result()
	}
}

// shardsLost: this node no longer owns these shards; stop their grains.
type shardsLost struct{ shards []int }

// stopGrains: stop every grain here (a rejoin or a drain).
type stopGrains struct{}

// grainMeta is one grain here; its map key is its ClusterIdentity.AsKey
// ("<kind>/<identity>"), from which stopped rebuilds the identity: the
// request's ClusterIdentity was ~80 bytes an active grain.
type grainMeta struct {
	pid   *actor.PID
	shard int
}

// identityOf reads a grain's key back into its kind and identity (a kind
// name has no '/'; an identity may).
func identityOf(key string) *pcluster.ClusterIdentity {
	kind, identity, _ := strings.Cut(key, "/")
	return pcluster.NewClusterIdentity(identity, kind)
}

// placement activates and tracks this node's grains.
type placement struct {
	c        *pcluster.Cluster
	log      *slog.Logger
	table    ownership.Table
	stopping *atomic.Int32 // the member's; see stopped
	actors   map[string]grainMeta
	// props holds, per kind seen (grainOf reads its names), what the placement spawns: the kind's Props
	// without the library's middleware when package kind made it (the
	// placement then sends the ClusterInit and clears the pid cache:
	// bare), else the kind's Props with an OnInit giving the grain the
	// identity in spawning, which the middleware reads. The library's
	// WithClusterIdentity clones the Props for every activation (~450
	// bytes an active grain, kept for its life). A spawn runs
	// its OnInit before it returns, on this actor's goroutine, so spawning
	// is always the grain's own.
	props    map[string]kindProps
	spawning *pcluster.ClusterIdentity
}

type kindProps struct {
	props *actor.Props
	bare  bool
}

// propsOf returns what to spawn for kind.
func (p *placement) propsOf(k *pcluster.ActivatedKind) kindProps {
	kp, ok := p.props[k.Kind]
	if !ok {
		if b, ok := kind.Bare(k.Props); ok {
			kp = kindProps{props: b, bare: true}
		} else {
			kp = kindProps{props: k.Props.Clone(actor.WithOnInit(func(ctx actor.Context) {
				pcluster.SetClusterIdentity(ctx, p.spawning)
			}))}
		}
		p.props[k.Kind] = kp
	}
	return kp
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
	delete(p.actors, key)
	ci := identityOf(key)
	if k := p.c.GetClusterKind(ci.Kind); k != nil {
		k.Dec()
	}
	if p.props[ci.Kind].bare {
		// What the library's middleware does in the grain's Stopped.
		p.c.PidCache.RemoveByValue(ci.Identity, ci.Kind, pid)
		p.c.ActorSystem.EventStream.Publish(&pcluster.ActivationTerminating{Pid: pid, ClusterIdentity: ci})
	}
	// A member that is stopping tells nobody: the others drop it with its
	// registration, and Proto.Actor's member list is not safe to read
	// while the stopping provider rewrites its topology.
	if p.stopping != nil && p.stopping.Load() == 2 {
		return
	}
	p.c.MemberList.BroadcastEvent(&pcluster.ActivationTerminated{Pid: pid, ClusterIdentity: ci}, true)
}

func (p *placement) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case barrier:
		ctx.Respond(barrier{})
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
		if p.log != nil {
			why := ""
			if e, ok := p.table.(interface{ Why(string) string }); ok {
				why = e.Why(ci.Identity)
			}
			p.log.Warn("grain activation refused: this node does not hold the shard", "identity", ci.Identity, "why", why, "error", errActivationRefused)
		}
		return &pcluster.ActivationResponse{Failed: true}
	}
	k := p.c.GetClusterKind(ci.Kind)
	if k == nil {
		return &pcluster.ActivationResponse{Failed: true}
	}
	kp := p.propsOf(k)
	p.spawning = ci
	pid := ctx.SpawnPrefix(kp.props, ci.Identity)
	p.spawning = nil
	if kp.bare {
		// The grain's first message: nobody else has its pid yet.
		ctx.Send(pid, &pcluster.ClusterInit{Identity: ci, Cluster: p.c})
	}
	k.Inc()
	p.actors[key] = grainMeta{pid: pid, shard: ownership.ShardOf(ci.Identity, p.table.Shards())}
	return &pcluster.ActivationResponse{Pid: pid}
}
