package ownership

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdConfig configures an Etcd table.
type EtcdConfig struct {
	Endpoints []string
	// TLS, when set, is used for every endpoint (no plaintext fallback);
	// Username and Password authenticate when etcd's auth is on.
	TLS                *tls.Config
	Username, Password string
	// Prefix holds the table: <Prefix>/nodes/<address> and
	// <Prefix>/shards/<n>, all on their node's one lease.
	Prefix string
	NodeID string
	Shards int
	// TTL is the liveness lease: a node that stops renewing (killed,
	// frozen, cut off) loses its shards TTL later, and its rooms answer
	// elsewhere right after. Margin is how much sooner the node itself
	// stops serving: it covers clock-rate differences and the time a
	// keepalive takes to arrive; renewals are sent every TTL/4.
	TTL, Margin time.Duration
	// HoldTTL is the lease the shard keys themselves are on (whole
	// seconds, at least TTL; DefaultHoldTTL when zero). It decides
	// nothing about who may serve (the liveness lease does); it only has
	// to outlast an etcd outage, so that the shard keys, and with them
	// the epochs, survive an old etcd leader that resumes and revokes
	// every liveness lease that ran out on its clock.
	HoldTTL time.Duration
	Logger  *slog.Logger
	// Observer follows the table without owning shards (a node that
	// hosts no rooms but routes to them).
	Observer bool
}

// grant is one shard's owner as the table last saw it.
type grant struct {
	owner string
	epoch int64 // etcd revision of the key's creation: rises on every takeover
	lease clientv3.LeaseID
}

// DefaultHoldTTL is the shard keys' lease when EtcdConfig.HoldTTL is
// zero: an etcd quorum loss shorter than about this keeps every shard
// where it is, under the same epoch.
const DefaultHoldTTL = 60 * time.Second

// Etcd is the production table: a node registers under two etcd leases,
// computes the assignment (Assign) over the registered nodes, creates the
// keys of its free shards under its hold lease (the creation's revision
// is the epoch), and deletes the keys of shards that are assigned
// elsewhere now. Who may serve is decided by the short liveness lease
// (TTL): the node key and the live key <Prefix>/live/<hold lease> are on
// it, and another node may delete a shard key only while the live key of
// the shard key's lease is absent (in the delete's transaction), i.e.
// after the owner's liveness lease expired, which the owner outran by its
// own clock (it stops serving at its last renewal + TTL − Margin). The
// hold lease (HoldTTL, long) only has to outlast an etcd outage: an old
// etcd leader that resumes after a quorum loss revokes every lease that
// ran out on its clock, so the short liveness leases go, but the shard
// keys stay, and the node re-attaches them to a new liveness lease,
// serving under the same epochs: no room moves or reloads. Renewals cost
// two requests per node, however many rooms.
type Etcd struct {
	cfg    EtcdConfig
	client *clientv3.Client
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}
	// renewNow asks the renewal loop for a renewal at once: the watch
	// showed this node's live key gone.
	renewNow chan struct{}
	sig      signal

	mu         sync.RWMutex
	self       string
	onLost     func([]int)
	lease      clientv3.LeaseID // the hold lease: the shard keys are on it
	live       clientv3.LeaseID // the liveness lease: the node key and live/<lease>
	validUntil time.Time        // monotonic: stop serving after it
	// servingSince is when the node last began serving after it was
	// not (registered, re-attached, or a renewal after a lapse): for one
	// TTL after it the node takes no shard from a node whose liveness
	// went, and counts the nodes that went recently as still there, since
	// after an etcd outage they are re-attaching too.
	servingSince time.Time
	holdRenewed  time.Time
	holdBusy     atomic.Bool  // a hold renewal is under way
	holdGone     atomic.Int64 // a hold lease renewHold found gone
	// floorRev is the revision of the last snapshot read applied
	// (resync, re-attach): watch events at or below it are in the table.
	// seenRev is the highest revision the table reflects (that snapshot
	// or a watch event after it): a snapshot read below it is older than
	// the table and is not applied (replaceLocked).
	floorRev int64
	seenRev  int64
	nodes    map[string]bool
	alive    map[clientv3.LeaseID]bool // hold leases whose live key exists
	// liveGone is when this table first saw a hold lease's live key
	// absent: its shards are taken over only orphanGrace after it.
	liveGone map[clientv3.LeaseID]time.Time
	// probed holds the leases whose owner's address was dialled once
	// to see whether the process is gone (probeGone).
	probed    map[clientv3.LeaseID]bool
	owners    []grant
	releasing map[int]bool // given up locally, key delete in flight
	// After this node lost its lease, until graceUntil it takes only the
	// shards it would own with graceNodes (the nodes registered then, and
	// those whose keys went within a TTL before: departed) still
	// registered: when etcd revoked every node's lease at once (an old
	// leader resuming after a quorum loss), the first node back would
	// otherwise take every shard and hand most of them back a moment
	// later, moving rooms twice. The watch may show the others' keys gone
	// just before this node learns that its own lease is, hence departed.
	graceUntil time.Time
	graceNodes map[string]bool
	departed   map[string]time.Time

	closeOnce sync.Once
	freeze    chan time.Duration // tests: stop renewing for a while, as a paused process would

	metrics *Metrics
}

// SetMetrics records lease and shard losses on m; call it before Start.
func (e *Etcd) SetMetrics(m *Metrics) { e.metrics = m }

// NewEtcd connects to etcd; Start registers the node.
func NewEtcd(cfg EtcdConfig) (*Etcd, error) {
	if cfg.Shards <= 0 {
		cfg.Shards = DefaultShards
	}
	if cfg.TTL < time.Second {
		return nil, fmt.Errorf("ownership: lease ttl %s is below etcd's one-second granularity", cfg.TTL)
	}
	if cfg.Margin <= 0 || cfg.Margin >= cfg.TTL/2 {
		return nil, fmt.Errorf("ownership: margin %s must be positive and under half the lease ttl %s", cfg.Margin, cfg.TTL)
	}
	if cfg.HoldTTL == 0 {
		cfg.HoldTTL = max(DefaultHoldTTL, cfg.TTL)
	}
	if cfg.HoldTTL < cfg.TTL || cfg.HoldTTL%time.Second != 0 {
		return nil, fmt.Errorf("ownership: hold lease ttl %s must be whole seconds and at least the lease ttl %s", cfg.HoldTTL, cfg.TTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Prefix = strings.TrimRight(cfg.Prefix, "/")
	// The dial includes the TLS handshake and, with etcd auth, the
	// password check (bcrypt on the server): more than one call's bound.
	client, err := clientv3.New(EtcdClientConfig(cfg.Endpoints, cfg.TLS, cfg.Username, cfg.Password, dialTimeout))
	if err != nil {
		return nil, fmt.Errorf("ownership: etcd client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Etcd{cfg: cfg, client: client, log: cfg.Logger.With("component", "ownership"), ctx: ctx, cancel: cancel,
		kick: make(chan struct{}, 1), renewNow: make(chan struct{}, 1), freeze: make(chan time.Duration), nodes: map[string]bool{}, alive: map[clientv3.LeaseID]bool{}, liveGone: map[clientv3.LeaseID]time.Time{}, probed: map[clientv3.LeaseID]bool{}, departed: map[string]time.Time{}, owners: make([]grant, cfg.Shards), releasing: map[int]bool{}}, nil
}

// opTimeout bounds every etcd call; dialTimeout the client's first
// connection.
const (
	opTimeout   = 2 * time.Second
	dialTimeout = 5 * time.Second
)

func (e *Etcd) Shards() int { return e.cfg.Shards }

func (e *Etcd) nodeKey(addr string) string { return e.cfg.Prefix + "/nodes/" + addr }
func (e *Etcd) shardKey(s int) string      { return e.cfg.Prefix + "/shards/" + strconv.Itoa(s) }
func (e *Etcd) liveKey(hold clientv3.LeaseID) string {
	return e.cfg.Prefix + "/live/" + strconv.FormatInt(int64(hold), 16)
}

func (e *Etcd) Hold(identity string) (int64, bool) {
	s := ShardOf(identity, e.cfg.Shards)
	e.mu.RLock()
	defer e.mu.RUnlock()
	g := e.owners[s]
	ok := e.self != "" && g.owner == e.self && g.lease == e.lease && !e.releasing[s] && time.Now().Before(e.validUntil)
	return g.epoch, ok
}

// Why describes the table's view of the identity's shard on this node
// (a refused activation's log line).
func (e *Etcd) Why(identity string) string {
	s := ShardOf(identity, e.cfg.Shards)
	e.mu.RLock()
	defer e.mu.RUnlock()
	g := e.owners[s]
	return fmt.Sprintf("shard %d owner %q epoch %d own-lease %v releasing %v serving %v nodes %d", s, g.owner, g.epoch,
		g.lease == e.lease, e.releasing[s], time.Now().Before(e.validUntil), len(e.nodes))
}

// Granted reports whether the table names this node as the shard's
// owner under its current lease, whether or not the lease is renewed now
// (Hold adds that): a grain whose node lost its coordinator but not its
// grant keeps its state, since nobody else can take the shard while the
// lease lives, and serves again under the same epoch if the lease
// survives the outage.
func (e *Etcd) Granted(identity string) (int64, bool) {
	s := ShardOf(identity, e.cfg.Shards)
	e.mu.RLock()
	defer e.mu.RUnlock()
	g := e.owners[s]
	return g.epoch, e.self != "" && e.lease != 0 && g.owner == e.self && g.lease == e.lease && !e.releasing[s]
}

func (e *Etcd) Owner(identity string) string {
	s := ShardOf(identity, e.cfg.Shards)
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.owners[s].owner
}

func (e *Etcd) Changed() <-chan struct{} { return e.sig.wait() }

// Serving reports whether this node's lease is renewed (its last renewal
// plus TTL minus margin is still ahead). False means the node cannot tell
// who owns anything now: etcd lost quorum or the node is cut off from it,
// and no grain of this node answers. The room client then refuses at once
// instead of retrying until the caller's deadline. An observer (no lease)
// is always serving: it has nothing to lose.
func (e *Etcd) Serving() bool {
	if e.cfg.Observer {
		return true
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return time.Now().Before(e.validUntil)
}

// RenewEvery is how often the node renews its lease (TTL/4, renewals): a
// node that stopped serving serves again at the first renewal that gets
// through, so its refusals tell callers to retry after this long.
func (e *Etcd) RenewEvery() time.Duration { return e.cfg.TTL / 4 }

// Start registers the node and starts the renew/reconcile loop and the
// watch. It returns once the node is registered and the table read.
func (e *Etcd) Start(self string, onLost func([]int)) error {
	e.mu.Lock()
	e.self, e.onLost = self, onLost
	e.mu.Unlock()
	if !e.cfg.Observer {
		if err := e.register(); err != nil {
			return err
		}
	}
	rev, err := e.resync()
	if err != nil {
		return err
	}
	e.wg.Add(1)
	go e.watch(rev)
	if !e.cfg.Observer {
		e.wg.Add(2)
		go e.renewals()
		go e.loop()
		e.poke()
	}
	return nil
}

// register takes a new hold lease and a new liveness lease and puts the
// node key and the live key on the latter.
func (e *Etcd) register() error {
	ctx, cancel := context.WithTimeout(e.ctx, opTimeout)
	defer cancel()
	t0 := time.Now()
	h, err := e.client.Grant(ctx, int64(e.cfg.HoldTTL/time.Second))
	if err != nil {
		return fmt.Errorf("ownership: etcd lease: %w", err)
	}
	l, err := e.client.Grant(ctx, int64(e.cfg.TTL/time.Second))
	if err != nil {
		return fmt.Errorf("ownership: etcd lease: %w", err)
	}
	if _, err := e.client.Txn(ctx).Then(
		clientv3.OpPut(e.nodeKey(e.self), e.cfg.NodeID, clientv3.WithLease(l.ID)),
		clientv3.OpPut(e.liveKey(h.ID), e.self, clientv3.WithLease(l.ID)),
	).Commit(); err != nil {
		return fmt.Errorf("ownership: register node: %w", err)
	}
	now := time.Now()
	e.mu.Lock()
	e.lease, e.live = h.ID, l.ID
	e.validUntil = t0.Add(time.Duration(l.TTL)*time.Second - e.cfg.Margin)
	e.servingSince, e.holdRenewed = now, t0
	e.nodes[e.self] = true
	e.alive[h.ID] = true
	e.mu.Unlock()
	e.afterServing()
	e.log.Info("ownership lease granted", "lease", int64(h.ID), "liveness", int64(l.ID), "ttl", e.cfg.TTL, "hold_ttl", e.cfg.HoldTTL)
	return nil
}

// afterServing reconciles again when the calm period after the node
// began serving ends.
func (e *Etcd) afterServing() { time.AfterFunc(e.cfg.TTL, e.poke) }

// reattach puts the node key and the live key of the hold lease on a new
// liveness lease after the old one was found gone (expired or revoked
// while the node was frozen, cut off, or while etcd had no quorum), and
// reads the table in the same transaction: the shard keys this node
// still has there are its own again under the same epochs (nobody could
// delete them after that transaction without its new live key being gone
// first), and those gone meanwhile are lost. The hold lease must be
// alive; if it is not, every shard key went with it and the node starts
// over (holdLost).
func (e *Etcd) reattach(hold clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(e.ctx, opTimeout)
	defer cancel()
	t0 := time.Now()
	if _, err := RenewLease(ctx, e.client, hold, e.renewTry()); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			e.holdLost(hold)
		} else if e.ctx.Err() == nil {
			e.log.Warn("ownership re-attach: hold lease renewal failed; retrying", "error", err)
		}
		return
	}
	e.mu.Lock()
	e.holdRenewed = t0
	e.mu.Unlock()
	l, err := e.client.Grant(ctx, int64(e.cfg.TTL/time.Second))
	if err != nil {
		e.log.Warn("ownership re-attach: liveness lease failed; retrying", "error", err)
		return
	}
	resp, err := e.client.Txn(ctx).Then(
		clientv3.OpPut(e.nodeKey(e.self), e.cfg.NodeID, clientv3.WithLease(l.ID)),
		clientv3.OpPut(e.liveKey(hold), e.self, clientv3.WithLease(l.ID)),
		clientv3.OpGet(e.cfg.Prefix+"/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		e.log.Warn("ownership re-attach failed; retrying", "error", err)
		return
	}
	e.mu.Lock()
	if e.lease != hold {
		e.mu.Unlock()
		return
	}
	lost := e.replaceLocked(resp.Responses[2].GetResponseRange().Kvs, resp.Header.Revision)
	e.live = l.ID
	e.validUntil = t0.Add(time.Duration(l.TTL)*time.Second - e.cfg.Margin)
	e.servingSince = time.Now()
	kept := 0
	for s, g := range e.owners {
		if g.owner == e.self && g.lease == hold && !e.releasing[s] {
			kept++
		}
	}
	e.mu.Unlock()
	e.lostUnreleased(lost)
	e.sig.fire()
	e.poke()
	e.afterServing()
	e.log.Warn("ownership liveness re-attached", "lease", int64(hold), "liveness", int64(l.ID), "shards_kept", kept, "shards_gone", len(lost))
}

func (e *Etcd) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// resync reads the whole table; it returns the revision to watch from.
func (e *Etcd) resync() (int64, error) {
	ctx, cancel := context.WithTimeout(e.ctx, opTimeout)
	defer cancel()
	resp, err := e.client.Get(ctx, e.cfg.Prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("ownership: read table: %w", err)
	}
	e.mu.Lock()
	lost := e.replaceLocked(resp.Kvs, resp.Header.Revision)
	// The watch goes on after what the table reflects.
	rev := max(resp.Header.Revision, e.seenRev)
	e.mu.Unlock()
	e.lostUnreleased(lost)
	e.sig.fire()
	return rev, nil
}

// replaceLocked replaces the table with kvs, read at rev; it returns
// this node's shards whose keys went or changed without its release.
// A snapshot older than the table is dropped: the watch and a re-attach
// (or a resync) race, and a re-attach's read that reached etcd before
// another node re-attached, applied after the watch showed that node's
// keys, would take the node out of the table for good (the watch does
// not deliver an event twice): this node would then compute the
// assignment without it and give up shards that nobody takes.
func (e *Etcd) replaceLocked(kvs []*mvccpb.KeyValue, rev int64) (lost []int) {
	if rev < e.seenRev {
		return nil
	}
	before, nodesBefore := e.owners, e.nodes
	e.nodes = map[string]bool{}
	e.alive = map[clientv3.LeaseID]bool{}
	e.owners = make([]grant, e.cfg.Shards)
	for _, kv := range kvs {
		e.applyLocked(string(kv.Key), string(kv.Value), kv.CreateRevision, clientv3.LeaseID(kv.Lease), false)
	}
	for n := range nodesBefore {
		if !e.nodes[n] {
			e.departLocked(n)
		}
	}
	now := time.Now()
	for l := range e.liveGone {
		if e.alive[l] {
			delete(e.liveGone, l)
		}
	}
	for _, g := range e.owners {
		if _, seen := e.liveGone[g.lease]; g.owner != "" && !e.alive[g.lease] && !seen {
			e.liveGone[g.lease] = now
		}
	}
	for s, g := range before {
		if e.self != "" && g.owner == e.self && g.lease == e.lease && !e.releasing[s] && e.owners[s] != g {
			lost = append(lost, s)
		}
	}
	// A release whose key the snapshot shows gone (or no longer this
	// node's) is over: its delete event is in no watch response now.
	for s := range e.releasing {
		if g := e.owners[s]; g.owner != e.self || g.lease != e.lease {
			delete(e.releasing, s)
		}
	}
	e.floorRev = max(e.floorRev, rev)
	e.seenRev = max(e.seenRev, rev)
	return lost
}

// applyEventsLocked applies one watch response's events that the table
// does not reflect yet; it returns this node's shards whose keys went or
// changed without its release.
func (e *Etcd) applyEventsLocked(events []*clientv3.Event) (lost []int) {
	for _, ev := range events {
		if ev.Kv.ModRevision <= e.floorRev {
			continue // a re-attach or resync read the table past it
		}
		if s, ok := e.applyLocked(string(ev.Kv.Key), string(ev.Kv.Value), ev.Kv.CreateRevision, clientv3.LeaseID(ev.Kv.Lease), ev.Type == clientv3.EventTypeDelete); ok {
			lost = append(lost, s)
		}
		// Not floorRev: the other events of the same transaction have
		// the same revision.
		e.seenRev = max(e.seenRev, ev.Kv.ModRevision)
	}
	return lost
}

// lostUnreleased stops the grains of shards whose keys went without this
// node releasing them (its lease expired or was revoked), as soon as the
// table shows it: a grain left in memory answers nothing without the
// lease, but it would be a second live copy of its room until its next
// message.
func (e *Etcd) lostUnreleased(shards []int) {
	if len(shards) == 0 {
		return
	}
	e.metrics.shardsLost(ReasonLeaseLost, len(shards))
	e.mu.RLock()
	onLost := e.onLost
	e.mu.RUnlock()
	if onLost != nil {
		onLost(shards)
	}
}

// departLocked records that a node's key went.
func (e *Etcd) departLocked(addr string) {
	delete(e.nodes, addr)
	now := time.Now()
	for n, at := range e.departed {
		if now.Sub(at) >= 2*e.cfg.TTL {
			delete(e.departed, n)
		}
	}
	e.departed[addr] = now
}

// applyLocked records one key's put or delete; lost reports a shard of
// this node's whose key went without its release.
func (e *Etcd) applyLocked(key, val string, created int64, lease clientv3.LeaseID, deleted bool) (lost int, ok bool) {
	rest := strings.TrimPrefix(key, e.cfg.Prefix+"/")
	switch {
	case strings.HasPrefix(rest, "live/"):
		if id, err := strconv.ParseInt(strings.TrimPrefix(rest, "live/"), 16, 64); err == nil {
			if deleted {
				delete(e.alive, clientv3.LeaseID(id))
				if _, ok := e.liveGone[clientv3.LeaseID(id)]; !ok {
					e.liveGone[clientv3.LeaseID(id)] = time.Now()
				}
				if e.lease != 0 && clientv3.LeaseID(id) == e.lease {
					// This node's liveness lease is gone (expired or
					// revoked: an etcd leader that resumes, after a
					// quorum loss or a pause of its own, revokes it
					// before it runs out on this node's clock), and the
					// others may take its shards orphanGrace from now:
					// stop serving, and renew at once, which finds the
					// lease gone and re-attaches the shards.
					e.validUntil = time.Time{}
					select {
					case e.renewNow <- struct{}{}:
					default:
					}
				}
			} else {
				e.alive[clientv3.LeaseID(id)] = true
				delete(e.liveGone, clientv3.LeaseID(id))
			}
		}
	case strings.HasPrefix(rest, "nodes/"):
		addr := strings.TrimPrefix(rest, "nodes/")
		if deleted {
			e.departLocked(addr)
		} else {
			e.nodes[addr] = true
			delete(e.departed, addr)
		}
	case strings.HasPrefix(rest, "shards/"):
		s, err := strconv.Atoi(strings.TrimPrefix(rest, "shards/"))
		if err != nil || s < 0 || s >= e.cfg.Shards {
			return 0, false
		}
		// Our key went (or changed) without our release: the lease
		// expired (dropAll counts the ones the watch has not seen go).
		g := e.owners[s]
		mine := g.owner == e.self && e.self != "" && g.lease == e.lease && !e.releasing[s]
		if deleted {
			e.owners[s] = grant{}
			delete(e.releasing, s)
		} else {
			e.owners[s] = grant{owner: val, epoch: created, lease: lease}
		}
		if mine && e.owners[s] != g {
			return s, true
		}
	}
	return 0, false
}

func (e *Etcd) watch(rev int64) {
	defer e.wg.Done()
	for e.ctx.Err() == nil {
		wch := e.client.Watch(clientv3.WithRequireLeader(e.ctx), e.cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if resp.Err() != nil {
				e.log.Warn("ownership watch interrupted; resyncing", "error", resp.Err())
				break
			}
			e.mu.Lock()
			lost := e.applyEventsLocked(resp.Events)
			e.mu.Unlock()
			e.lostUnreleased(lost)
			rev = resp.Header.Revision
			e.sig.fire()
			e.poke()
		}
		for e.ctx.Err() == nil {
			r, err := e.resync()
			if err == nil {
				rev = r
				e.poke()
				break
			}
			e.log.Warn("ownership resync failed; retrying", "error", err)
			select {
			case <-e.ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// renewals renews the lease every TTL/4, on its own goroutine so that a
// long reconcile (a thousand shards to take over) never delays one. A
// renewal that fails is retried at once, on another member (RenewLease),
// not at the next tick.
func (e *Etcd) renewals() {
	defer e.wg.Done()
	t := time.NewTicker(e.RenewEvery())
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		case <-e.renewNow:
		case d := <-e.freeze:
			time.Sleep(d)
		}
		e.renew()
		e.poke()
	}
}

// loop reconciles the node's shards with the assignment whenever the
// table or the lease changes.
func (e *Etcd) loop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-e.kick:
		}
		e.reconcile()
	}
}

// renewTry bounds one try of a renewal: short enough that a try stuck
// on a frozen member leaves time for two more before the node stops
// serving (TTL − margin after the last renewal's send).
func (e *Etcd) renewTry() time.Duration { return e.cfg.TTL / 6 }

func (e *Etcd) renew() {
	e.mu.RLock()
	hold, live := e.lease, e.live
	e.mu.RUnlock()
	if gone := clientv3.LeaseID(e.holdGone.Swap(0)); gone != 0 && gone == hold {
		e.holdLost(hold)
		return
	}
	switch {
	case hold == 0:
		// A re-register that failed: try it again.
		if err := e.register(); err != nil && e.ctx.Err() == nil {
			e.log.Warn("ownership re-register failed; retrying", "error", err)
		}
		return
	case live == 0:
		e.reattach(hold)
		return
	}
	start := time.Now()
	r, err := RenewLease(e.ctx, e.client, live, e.renewTry())
	t0, ttl, tries := r.Sent, r.TTL, r.Tries
	switch {
	case err == nil:
		lapsed := false
		e.mu.Lock()
		if e.live == live {
			lapsed = !start.Before(e.validUntil)
			e.validUntil = t0.Add(time.Duration(ttl)*time.Second - e.cfg.Margin)
			if lapsed {
				e.servingSince = time.Now()
			}
		}
		e.mu.Unlock()
		if lapsed {
			e.afterServing()
		}
		if tries > 1 {
			e.log.Warn("ownership lease renewed after failed tries", "tries", tries, "took", time.Since(start).Round(time.Millisecond))
		}
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// Expired or revoked while this node was frozen or cut off, or
		// by an etcd leader that resumed after a quorum loss. The shard
		// keys are on the hold lease: those nobody took meanwhile are
		// still this node's, under the same epochs.
		e.log.Warn("ownership liveness lease gone; re-attaching the shards", "liveness", int64(live), "tries", tries)
		e.mu.Lock()
		if e.live == live {
			e.live, e.validUntil = 0, time.Time{}
		}
		e.mu.Unlock()
		e.reattach(hold)
		return
	default:
		return
	}
	e.mu.RLock()
	due := time.Since(e.holdRenewed) >= e.cfg.HoldTTL/4
	e.mu.RUnlock()
	// Off the renewal loop: a hold renewal waiting out an election must
	// not delay the next liveness renewal.
	if due && e.holdBusy.CompareAndSwap(false, true) {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer e.holdBusy.Store(false)
			e.renewHold(hold)
		}()
	}
}

// renewHold renews the hold lease, within one renewal period (a try
// that fails is repeated at the next). It runs off the renewal loop, so
// a hold lease found gone is left to the loop (holdGone), which alone
// registers and re-attaches.
func (e *Etcd) renewHold(hold clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(e.ctx, e.RenewEvery())
	defer cancel()
	r, err := RenewLease(ctx, e.client, hold, e.renewTry())
	switch {
	case err == nil:
		e.mu.Lock()
		e.holdRenewed = r.Sent
		e.mu.Unlock()
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		e.holdGone.Store(int64(hold)) // the loop's next renewal starts over
	}
}

// holdLost starts over after the hold lease went (it ran out or was
// revoked): every shard key went with it, and every shard this node had
// may have a new owner already.
func (e *Etcd) holdLost(hold clientv3.LeaseID) {
	e.log.Warn("ownership lease lost; re-registering", "lease", int64(hold))
	e.metrics.leaseLost()
	e.mu.Lock()
	if e.lease != hold {
		e.mu.Unlock()
		return
	}
	now := time.Now()
	e.graceNodes = maps.Clone(e.nodes)
	for n, at := range e.departed {
		if now.Sub(at) < e.cfg.TTL {
			e.graceNodes[n] = true
		}
	}
	e.graceUntil = now.Add(e.cfg.TTL)
	live := e.live
	e.mu.Unlock()
	e.dropAll()
	if live != 0 {
		// Its live key names a lease that is gone: nothing to protect.
		ctx, cancel := context.WithTimeout(e.ctx, e.renewTry())
		_, _ = e.client.Revoke(ctx, live)
		cancel()
	}
	if err := e.register(); err != nil {
		e.log.Warn("ownership re-register failed; retrying", "error", err)
	}
	// The grace ends: reconcile over the nodes registered then.
	time.AfterFunc(e.cfg.TTL, e.poke)
}

// dropAll forgets the node's grants (their keys went with the lease).
func (e *Etcd) dropAll() {
	e.mu.Lock()
	var lost []int
	for s, g := range e.owners {
		if g.owner == e.self {
			lost = append(lost, s)
			if g.lease == e.lease {
				e.owners[s] = grant{}
			}
		}
	}
	e.lease, e.live = 0, 0
	e.validUntil = time.Time{}
	onLost := e.onLost
	e.mu.Unlock()
	e.metrics.shardsLost(ReasonLeaseLost, len(lost))
	if len(lost) > 0 && onLost != nil {
		onLost(lost)
	}
	e.sig.fire()
}

// reconcile acquires the free shards assigned to this node, takes over
// those assigned to it whose owner's liveness went, and gives up the ones
// assigned elsewhere.
func (e *Etcd) reconcile() {
	e.mu.Lock()
	now := time.Now()
	if e.lease == 0 || e.live == 0 || !now.Before(e.validUntil) || !e.nodes[e.self] || !e.alive[e.lease] {
		// Not serving, or the table shows this node's own liveness gone
		// (it re-attaches at its next renewal): an assignment computed
		// now would leave this node out and give up all its shards.
		e.mu.Unlock()
		return
	}
	nodes := make([]string, 0, len(e.nodes))
	for n := range e.nodes {
		nodes = append(nodes, n)
	}
	extra := map[string]bool{}
	if now.Before(e.graceUntil) {
		maps.Copy(extra, e.graceNodes)
	}
	// Just back after a lapse (an etcd outage ends with every node's
	// liveness revoked at once): the nodes that went recently are
	// re-attaching like this one, so they keep their shards for a TTL.
	calm := now.Sub(e.servingSince) >= e.cfg.TTL
	if !calm {
		for n := range e.departed {
			extra[n] = true
		}
	}
	for n := range extra {
		if !e.nodes[n] {
			nodes = append(nodes, n)
		}
	}
	want := Assign(nodes, e.cfg.Shards)
	lease, self := e.lease, e.self
	var acquire, release []int
	var orphans []orphan
	var orphanDue time.Time
	referenced := map[clientv3.LeaseID]bool{}
	for s, g := range e.owners {
		mine := want != nil && want[s] == self
		referenced[g.lease] = true
		switch {
		case g.owner == "" && mine:
			acquire = append(acquire, s)
		case g.owner == self && g.lease == lease && !mine && !e.releasing[s]:
			release = append(release, s)
		case g.owner != "" && g.lease != lease && !e.alive[g.lease] && mine && calm:
			if due := e.orphanDueLocked(g.lease, now); now.Before(due) {
				if orphanDue.IsZero() || due.Before(orphanDue) {
					orphanDue = due
				}
				if !e.probed[g.lease] {
					e.probed[g.lease] = true
					go e.probeGone(g.lease, g.owner)
				}
				continue
			}
			orphans = append(orphans, orphan{shard: s, grant: g})
		}
	}
	for l := range e.liveGone {
		if !referenced[l] {
			delete(e.liveGone, l)
		}
	}
	for l := range e.probed {
		if !referenced[l] {
			delete(e.probed, l)
		}
	}
	e.mu.Unlock()
	if !orphanDue.IsZero() {
		time.AfterFunc(time.Until(orphanDue), e.poke)
	}
	if len(release) > 0 {
		e.release(release)
	}
	for len(acquire) > 0 && e.ctx.Err() == nil {
		n := min(len(acquire), acquireBatch)
		if !e.acquire(acquire[:n], lease) && n > 1 {
			// Some shard of the batch is taken: one by one.
			for _, s := range acquire[:n] {
				e.acquire([]int{s}, lease)
			}
		}
		acquire = acquire[n:]
	}
	// One dead node's shards at a time, as many as a transaction takes
	// (one compare for its live key, one per shard key): a node taking
	// over a third of 1024 shards deletes them in three round trips.
	slices.SortStableFunc(orphans, func(a, b orphan) int { return cmp.Compare(a.grant.lease, b.grant.lease) })
	for len(orphans) > 0 && e.ctx.Err() == nil {
		n := 1
		for n < len(orphans) && n < maxTxnOps-1 && orphans[n].grant.lease == orphans[0].grant.lease {
			n++
		}
		if ok, ownerLive := e.takeOver(orphans[:n], lease); !ok && !ownerLive && n > 1 {
			// A key changed meanwhile: one by one. Not when the owner's
			// live key is there (it re-attached, or this table has not
			// seen it yet): every one would fail the same way.
			for i := range orphans[:n] {
				e.takeOver(orphans[i:i+1], lease)
			}
		}
		orphans = orphans[n:]
	}
}

// orphanDueLocked is when the shards of hold lease l, whose live key is
// absent, may be taken over: orphanGrace after this table first saw the
// key absent. e.mu is held for writing.
//
// The absence alone does not prove the owner stopped serving: an etcd
// leader that resumes after a pause (SIGSTOP, a VM freeze) revokes every
// lease that ran out on its own clock, though the others' renewals kept
// them alive on the new leader (an etcd without the fix of its issue
// 15247, such as 3.4.23, forwards those revocations, and the new leader
// applies them; the fix itself only narrows the window). The owner, alive,
// sees its live key go in its watch and re-attaches at once, which puts
// the live key back; the takeover's compare then fails and nothing
// moves. A node that is really gone is taken over orphanGrace later than
// its lease ran out.
func (e *Etcd) orphanDueLocked(l clientv3.LeaseID, now time.Time) time.Time {
	at, ok := e.liveGone[l]
	if !ok {
		at = now
		e.liveGone[l] = at
	}
	return at.Add(e.orphanGrace())
}

// orphanGrace is how long a hold lease's live key must be seen absent
// before its shards are taken over: half a renewal period (250 ms with
// the default 2 s TTL), time for an owner whose liveness lease was
// revoked under it to see that in its watch and re-attach (three etcd
// round trips: 3–45 ms measured, on a loaded machine). It adds to a dead
// node's failover (TTL + etcd's expiry check + this), so it is not the
// full renewal period that would also cover an owner whose watch lags.
func (e *Etcd) orphanGrace() time.Duration { return e.RenewEvery() / 2 }

// probeGone dials the address of an owner whose live key went. A
// refused connection means no process listens there any more (it was
// killed, or it exited), so it cannot be an owner re-attaching after a
// revocation, which is what orphanGrace waits for: its shards become
// due at once. Any other outcome (connected, a timeout of a frozen
// host or a partition, an address that is not host:port) leaves the
// grace as it is. The takeover stays fenced by the live key's compare
// and the epochs either way; this only saves a dead node's failover the
// grace.
func (e *Etcd) probeGone(l clientv3.LeaseID, addr string) {
	ctx, cancel := context.WithTimeout(e.ctx, probeGoneTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return
	}
	e.mu.Lock()
	at, gone := e.liveGone[l]
	if gone && !e.alive[l] {
		e.liveGone[l] = at.Add(-e.orphanGrace())
	}
	e.mu.Unlock()
	if gone {
		e.log.Info("ownership: the owner of a gone liveness refuses connections; its shards are due now", "from", addr)
		e.poke()
	}
}

// probeGoneTimeout bounds probeGone's dial; a refusal from a live host
// comes back in a round trip.
const probeGoneTimeout = 200 * time.Millisecond

// orphan is a shard key whose owner's live key is gone.
type orphan struct {
	shard int
	grant grant
}

// takeOver deletes the keys of orphans, each only if it is still the
// grant seen and its lease's live key is still absent (the owner's
// liveness lease expired, so the owner stopped serving by its own clock
// before; a node that re-attached in between keeps its shard), all in
// one transaction, then acquires them under lease. It reports false if
// a condition failed, and then whether the first orphan's owner has its
// live key (it is alive: nothing of it can be taken).
func (e *Etcd) takeOver(orphans []orphan, lease clientv3.LeaseID) (ok, ownerLive bool) {
	ctx, cancel := context.WithTimeout(e.ctx, opTimeout)
	defer cancel()
	var cmps []clientv3.Cmp
	checked := map[clientv3.LeaseID]bool{}
	dels := make([]clientv3.Op, len(orphans))
	shards := make([]int, len(orphans))
	for i, o := range orphans {
		if !checked[o.grant.lease] {
			checked[o.grant.lease] = true
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(e.liveKey(o.grant.lease)), "=", 0))
		}
		key := e.shardKey(o.shard)
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", o.grant.epoch))
		dels[i] = clientv3.OpDelete(key)
		shards[i] = o.shard
	}
	resp, err := e.client.Txn(ctx).If(cmps...).Then(dels...).Else(clientv3.OpGet(e.liveKey(orphans[0].grant.lease), clientv3.WithCountOnly())).Commit()
	if err != nil {
		e.log.Warn("ownership takeover failed", "shards", len(orphans), "first", orphans[0].shard, "error", err)
		return true, false // not a conflict: the next reconcile tries again
	}
	if !resp.Succeeded {
		live := len(resp.Responses) > 0 && resp.Responses[0].GetResponseRange().GetCount() > 0
		return false, live
	}
	e.log.Info("ownership took over shards of a node whose liveness went", "shards", len(orphans), "from", orphans[0].grant.owner)
	for len(shards) > 0 && e.ctx.Err() == nil {
		n := min(len(shards), acquireBatch)
		e.acquire(shards[:n], lease)
		shards = shards[n:]
	}
	return true, false
}

// acquireBatch shards are created in one etcd transaction (etcd allows
// maxTxnOps operations per transaction by default): a node taking over a
// third of 1024 shards needs a handful of round trips, not hundreds.
const (
	acquireBatch = 64
	maxTxnOps    = 128
)

// acquire creates the keys of shards under lease if every one of them is
// free, all in one transaction; it reports whether it did.
func (e *Etcd) acquire(shards []int, lease clientv3.LeaseID) bool {
	ctx, cancel := context.WithTimeout(e.ctx, opTimeout)
	defer cancel()
	cmps := make([]clientv3.Cmp, len(shards))
	puts := make([]clientv3.Op, len(shards))
	for i, s := range shards {
		key := e.shardKey(s)
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		puts[i] = clientv3.OpPut(key, e.self, clientv3.WithLease(lease))
	}
	resp, err := e.client.Txn(ctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		e.log.Warn("ownership acquire failed", "shards", len(shards), "first", shards[0], "error", err)
		return true // not a conflict: the next reconcile tries again
	}
	if !resp.Succeeded {
		return false // someone else was first; the watch tells who
	}
	e.mu.Lock()
	if e.lease == lease {
		for _, s := range shards {
			e.owners[s] = grant{owner: e.self, epoch: resp.Header.Revision, lease: lease}
		}
	}
	e.mu.Unlock()
	e.sig.fire()
	e.log.Info("ownership acquired shards", "shards", len(shards), "first", shards[0], "epoch", resp.Header.Revision)
	return true
}

// release stops serving the shards at once, then deletes their keys (only
// if still ours). The grains of a released shard are stopped by onLost;
// an append one of them still has in flight is refused by the epoch
// fence once the next owner has claimed its room.
func (e *Etcd) release(shards []int) {
	e.mu.Lock()
	grants := make([]grant, len(shards))
	for i, s := range shards {
		e.releasing[s] = true
		grants[i] = e.owners[s]
	}
	onLost := e.onLost
	e.mu.Unlock()
	e.metrics.shardsLost(ReasonReassigned, len(shards))
	e.log.Info("ownership releasing shards assigned elsewhere", "shards", len(shards), "first", shards[0])
	if onLost != nil {
		onLost(shards)
	}
	for len(shards) > 0 && e.ctx.Err() == nil {
		n := min(len(shards), acquireBatch)
		if !e.deleteOwn(shards[:n], grants[:n]) && n > 1 {
			for i, s := range shards[:n] {
				e.deleteOwn([]int{s}, grants[i:i+1])
			}
		}
		shards, grants = shards[n:], grants[n:]
	}
}

// deleteOwn deletes the shard keys if each is still the grant this node
// created, in one transaction; it reports false if one was not.
func (e *Etcd) deleteOwn(shards []int, grants []grant) bool {
	ctx, cancel := context.WithTimeout(e.ctx, opTimeout)
	defer cancel()
	cmps := make([]clientv3.Cmp, len(shards))
	dels := make([]clientv3.Op, len(shards))
	for i, s := range shards {
		key := e.shardKey(s)
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(key), "=", grants[i].epoch)
		dels[i] = clientv3.OpDelete(key)
	}
	resp, err := e.client.Txn(ctx).If(cmps...).Then(dels...).Commit()
	if err != nil {
		// Still ours (the lease lives on): try again at the next reconcile.
		e.log.Warn("ownership release failed; retrying", "shards", len(shards), "error", err)
		e.mu.Lock()
		for _, s := range shards {
			delete(e.releasing, s)
		}
		e.mu.Unlock()
		return true
	}
	if !resp.Succeeded {
		e.log.Warn("ownership release: a shard key is not the grant this node holds", "shards", len(shards), "first", shards[0], "epoch", grants[0].epoch)
	}
	return resp.Succeeded
}

// Nodes lists the registered node addresses (sorted).
func (e *Etcd) Nodes() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]string, 0, len(e.nodes))
	for n := range e.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Owned counts the shards this node holds now.
func (e *Etcd) Owned() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	n := 0
	for s, g := range e.owners {
		if g.owner == e.self && g.lease == e.lease && !e.releasing[s] {
			n++
		}
	}
	return n
}

// Close revokes the lease (every shard key goes with it, so the others
// take over at once) and stops.
func (e *Etcd) Close() {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		hold, live := e.lease, e.live
		e.lease, e.live, e.validUntil = 0, 0, time.Time{}
		e.mu.Unlock()
		e.cancel()
		e.wg.Wait()
		for _, l := range []clientv3.LeaseID{hold, live} {
			if l != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				_, _ = e.client.Revoke(ctx, l)
				cancel()
			}
		}
		_ = e.client.Close()
		e.sig.fire()
	})
}

// Kill stops renewing without revoking, as a crash would: the shards stay
// with the expiring lease.
func (e *Etcd) Kill() {
	e.closeOnce.Do(func() {
		e.cancel()
		e.wg.Wait()
		_ = e.client.Close()
	})
}
