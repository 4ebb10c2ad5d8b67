package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/ownership"
)

// etcdProvider keeps one key per member under
// <etcd_base_key>/<cluster name>/<member id>, attached to a lease the
// member keeps alive. The library's etcd provider is not used because
// (read in its source at our pin): its member ids ("name@systemid") differ
// from the ids gossip and the block list use; a member whose lease expired
// (paused, partitioned) re-registers under the same, now blocked, id and
// never comes back (#1133); and its etcd calls have no deadlines. Here the
// id is the actor system id, a lost lease re-registers under a new id
// unless every other member lost its lease with it (below), and every
// call is bounded.
//
// An etcd leader that resumes after a quorum loss revokes every lease
// that ran out on its clock: every member's at once. Then no member has
// dropped another from its view, so each re-registers under the same id
// and the actor cluster's topology does not change: a member removes
// another from its view only after its key has been gone for
// removalDelay, and not while its own registration is unsettled (its
// lease lost, or its renewals failing, within two TTLs), since the
// others are re-registering too; a member whose lease went while another
// member's key survived takes a new id, as that member dropped (and
// blocked) the old one.
type etcdProvider struct {
	cfg    configs.ClusterConfig
	nodeID string
	log    *slog.Logger
	client *clientv3.Client
	hook   rejoinHook

	c      *pcluster.Cluster
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	self      record
	gen       int
	lease     clientv3.LeaseID
	kaCancel  context.CancelFunc
	leaving   bool // Leave, Kill or Shutdown ran: never register again
	rejoining bool

	memberState

	viewMu  sync.Mutex
	members map[string]record // the view as etcd has it, by member id
	// pending are members whose key went but who stay in the published
	// view until due (removalDelay, longer while this member is
	// unsettled), in case they come back under the same id.
	pending        map[string]pendingRemoval
	unsettledUntil time.Time
	// goodRev is etcd's revision when this member's lease was last known
	// alive (registered or renewed): a member key created at or before it
	// outlived whatever took this member's lease.
	goodRev atomic.Int64
	// regRev is the revision of this member's current registration: a
	// delete of its key at or before it is of an older one.
	regRev atomic.Int64
	// renewedAt is when the renewal (or registration) that last got
	// through was sent, goneSeenAt when the watch last showed this
	// member's own key deleted (Unix nanoseconds): rejoin's quickID.
	renewedAt, goneSeenAt atomic.Int64
}

// pendingRemoval is a member whose key went, still published until due.
type pendingRemoval struct {
	rec record
	due time.Time
}

// removalDelay is how long a member whose key went stays in the view:
// long enough for this member to learn that its own lease went in the
// same revocation (an etcd leader revokes the expired leases one by
// one, milliseconds apart), a second more for a member killed for good.
const removalDelay = time.Second

// etcdOpTimeout bounds every single etcd call.
const etcdOpTimeout = 3 * time.Second

func newEtcdProvider(cfg configs.ClusterConfig, nodeID string, log *slog.Logger, hook rejoinHook) (*etcdProvider, error) {
	tc, err := cfg.EtcdTLS.Load()
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd_tls: %w", err)
	}
	client, err := clientv3.New(ownership.EtcdClientConfig(cfg.EtcdEndpoints, tc, cfg.EtcdUsername, cfg.EtcdPassword, etcdOpTimeout))
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &etcdProvider{cfg: cfg, nodeID: nodeID, log: log, client: client, hook: hook,
		ctx: ctx, cancel: cancel, members: map[string]record{}, pending: map[string]pendingRemoval{}}, nil
}

func (p *etcdProvider) prefix() string {
	return strings.TrimRight(p.cfg.EtcdBaseKey, "/") + "/" + p.cfg.Name + "/"
}

func (p *etcdProvider) StartMember(c *pcluster.Cluster) error {
	self, err := selfRecord(c, p.nodeID)
	if err != nil {
		return err
	}
	p.c = c
	p.mu.Lock()
	p.self = self
	p.selfID.Store(self.ID)
	err = p.registerLocked()
	p.mu.Unlock()
	if err != nil {
		return err
	}
	rev, err := p.resync()
	if err != nil {
		return err
	}
	p.synced.Store(true)
	p.wg.Add(1)
	go p.watch(rev)
	return nil
}

func (p *etcdProvider) StartClient(*pcluster.Cluster) error {
	return errors.New("cluster: etcd provider: client mode is not supported")
}

// registerLocked puts this member's key under a new lease and keeps the
// lease alive. p.mu is held.
func (p *etcdProvider) registerLocked() error {
	ctx, cancel := context.WithTimeout(p.ctx, etcdOpTimeout)
	defer cancel()
	ttl := int64((p.cfg.EtcdLeaseTTL + time.Second - 1) / time.Second)
	grant, err := p.client.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("cluster: etcd lease: %w", err)
	}
	val, err := json.Marshal(p.self)
	if err != nil {
		return err
	}
	put, err := p.client.Put(ctx, p.prefix()+p.self.ID, string(val), clientv3.WithLease(grant.ID))
	if err != nil {
		return fmt.Errorf("cluster: etcd register: %w", err)
	}
	p.goodRev.Store(put.Header.Revision)
	p.regRev.Store(put.Header.Revision)
	p.renewedAt.Store(time.Now().UnixNano())
	kaCtx, kaCancel := context.WithCancel(p.ctx)
	p.lease, p.kaCancel = grant.ID, kaCancel
	p.wg.Add(1)
	go p.keepAlive(kaCtx, p.self.ID, grant.ID)
	return nil
}

// keepAlive renews the member's lease every third of its TTL until ctx
// ends, one KeepAliveOnce at a time with a short deadline, retried at
// once on another member when it fails (ownership.RenewLease). The
// client's KeepAlive stream is not used: it stays on one connection, and
// when that member freezes (SIGSTOP, a VM pause) the stream waits on it,
// sending renewals nobody answers, until the new leader lets the lease
// expire (every member re-registered 5 s into a 10 s leader pause). Only
// etcd saying the lease is gone starts a rejoin under a new id; a renewal
// that fails during an election or a quorum loss does not (the new leader
// extends every lease), so the member keeps its id and the actor
// cluster's topology does not churn as etcd recovers.
func (p *etcdProvider) keepAlive(ctx context.Context, id string, lease clientv3.LeaseID) {
	defer p.wg.Done()
	every := max(p.cfg.EtcdLeaseTTL/3, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		r, err := ownership.RenewLease(ctx, p.client, lease, every/2)
		tries := r.Tries
		if tries > 1 || err != nil {
			p.unsettle()
		}
		if err == nil {
			p.goodRev.Store(r.Revision)
			p.renewedAt.Store(r.Sent.UnixNano())
		}
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			p.lost(id, "etcd lease expired")
			return
		case err != nil:
			return // stopping
		case tries > 1:
			p.log.Warn("cluster member lease renewed after failed tries", "member_id", id, "tries", tries, "took", time.Since(start).Round(time.Millisecond))
		}
	}
}

// unsettle marks this member's registration unsettled for two TTLs: the
// removals it sees meanwhile wait (the others may be re-registering as
// it is).
func (p *etcdProvider) unsettle() {
	p.viewMu.Lock()
	p.unsettledUntil = time.Now().Add(2 * p.cfg.EtcdLeaseTTL)
	p.viewMu.Unlock()
}

// lost starts a rejoin if id is still this member's registration.
func (p *etcdProvider) lost(id, reason string) {
	p.unsettle()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leaving || p.rejoining || id != p.self.ID || p.ctx.Err() != nil {
		return
	}
	p.rejoining = true
	p.wg.Add(1)
	go p.rejoin(reason, !strings.HasPrefix(reason, blockedReason))
}

func (p *etcdProvider) Rejoin(id, reason string) { p.lost(id, reason) }

// blockedReason starts the reason of a rejoin because another member
// blocked this one: that always takes a new id.
const blockedReason = "blocked by member"

// othersLostToo reports whether no other member's key outlived this
// member's lease: every one is gone or was created after this member's
// lease was last known alive (its lease went too), so no other member
// kept its registration while this one's key was gone, dropped this
// member from its view, and blocked its id. An error reads as no.
func (p *etcdProvider) othersLostToo() bool {
	ctx, cancel := context.WithTimeout(p.ctx, etcdOpTimeout)
	defer cancel()
	resp, err := p.client.Get(ctx, p.prefix(), clientv3.WithPrefix())
	if err != nil {
		return false
	}
	self, good := p.prefix()+p.SelfID(), p.goodRev.Load()
	for _, kv := range resp.Kvs {
		if string(kv.Key) != self && kv.CreateRevision <= good {
			return false
		}
	}
	return true
}

// quickID reports whether this member's key went so recently that it can
// be put back under the same id before any other member drops the id
// from its view (which waits removalDelay after it saw the key go): the
// key went after the last renewal that got through (the lease was there
// then) and, by the watch, about when it showed the delete; re-registering
// starts now and must land within removalDelay/2 of the later of the two.
// That renewal must be within a TTL, so that the lease was revoked, not
// run out: a member that resumes after a long freeze gets the delete of
// its key from its watch only now, long after the others dropped it.
//
// This is what an etcd leader that resumes after its own pause does to
// a member whose renewals the new leader kept answering (an etcd without
// the fix of its issue 15247, such as 3.4.23, forwards the revocation of
// every lease that ran out on the old leader's clock, and the new leader
// applies it). Should the
// put land late all the same, the member that blocked the id reports it
// (watchdog) and this member rejoins under a new id.
func (p *etcdProvider) quickID() bool {
	now := time.Now()
	renewed := time.Unix(0, p.renewedAt.Load())
	if now.Sub(renewed) >= p.cfg.EtcdLeaseTTL {
		return false
	}
	wentAfter := renewed
	if seen := time.Unix(0, p.goneSeenAt.Load()); seen.After(wentAfter) {
		wentAfter = seen
	}
	return now.Before(wentAfter.Add(removalDelay / 2))
}

// rejoin drops the old registration and registers again, retrying until
// etcd answers or the member stops: under the same id when keepID and
// every other member lost its lease as well (othersLostToo), else under
// a new id.
func (p *etcdProvider) rejoin(reason string, keepID bool) {
	defer p.wg.Done()
	if keepID && p.quickID() {
		// Re-registered before any other member drops this one: same id.
	} else if keepID {
		// An etcd leader revokes the expired leases one after another,
		// within milliseconds; ask once the others' went as well.
		select {
		case <-p.ctx.Done():
		case <-time.After(removalDelay / 2):
		}
		keepID = p.othersLostToo()
	}
	p.mu.Lock()
	old := p.self.ID
	oldLease, kaCancel := p.lease, p.kaCancel
	if !keepID {
		p.gen++
		p.self.ID = generationID(baseID(old), p.gen)
	}
	newID := p.self.ID
	p.selfID.Store(newID)
	p.mu.Unlock()
	if kaCancel != nil {
		kaCancel()
	}
	if !keepID {
		// The old id is gone for good: out of this member's own view now.
		p.viewMu.Lock()
		delete(p.members, old)
		delete(p.pending, old)
		p.publishLocked()
		p.viewMu.Unlock()
	}
	if keepID {
		p.log.Warn("cluster member key gone before any other member could drop it, or with every other member's; re-registering under the same member id", "reason", reason, "member_id", old)
	} else {
		p.log.Warn("cluster member dropped; re-registering under a new member id", "reason", reason, "old_member_id", old, "member_id", newID)
		if p.hook != nil {
			p.hook(old, newID, reason)
		}
	}
	// Delete first so the others see old leave before new join; the key
	// may already be gone with its lease.
	ctx, cancel := context.WithTimeout(p.ctx, etcdOpTimeout)
	if !keepID {
		_, _ = p.client.Delete(ctx, p.prefix()+old)
	}
	_, _ = p.client.Revoke(ctx, oldLease)
	cancel()
	for wait := 200 * time.Millisecond; ; wait = min(wait*2, 2*time.Second) {
		p.mu.Lock()
		if p.leaving || p.ctx.Err() != nil {
			p.rejoining = false
			p.mu.Unlock()
			return
		}
		err := p.registerLocked()
		if err == nil {
			p.rejoining = false
			p.mu.Unlock()
			if keepID {
				p.log.Info("cluster member re-registered under the same member id", "member_id", newID)
			} else {
				p.rejoins.Add(1)
				p.log.Info("cluster member re-registered", "member_id", newID)
			}
			return
		}
		p.mu.Unlock()
		p.log.Warn("cluster member re-register failed; retrying", "error", err, "retry_in", wait)
		select {
		case <-p.ctx.Done():
		case <-time.After(wait):
		}
	}
}

// resync reads every member key and publishes the view; it returns the
// revision to watch from.
func (p *etcdProvider) resync() (int64, error) {
	ctx, cancel := context.WithTimeout(p.ctx, etcdOpTimeout)
	defer cancel()
	resp, err := p.client.Get(ctx, p.prefix(), clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("cluster: etcd list members: %w", err)
	}
	p.viewMu.Lock()
	before := p.members
	p.members = map[string]record{}
	for _, kv := range resp.Kvs {
		var r record
		if err := json.Unmarshal(kv.Value, &r); err != nil || r.ID == "" {
			p.log.Warn("cluster: ignoring malformed member key", "key", string(kv.Key))
			continue
		}
		p.putLocked(r)
	}
	for id, r := range before {
		if _, ok := p.members[id]; !ok {
			p.goneLocked(r)
		}
	}
	p.publishLocked()
	p.viewMu.Unlock()
	return resp.Header.Revision, nil
}

// putLocked records a member key's put. A pending member at the same
// address is gone for good: that process re-registered under a new id.
func (p *etcdProvider) putLocked(r record) {
	p.members[r.ID] = r
	for id, pr := range p.pending {
		if id == r.ID || (pr.rec.Host == r.Host && pr.rec.Port == r.Port) {
			delete(p.pending, id)
		}
	}
}

// goneLocked records that a member's key went: it stays published until
// removalDelay has passed and this member is settled (settle).
func (p *etcdProvider) goneLocked(r record) {
	delete(p.members, r.ID)
	p.pending[r.ID] = pendingRemoval{rec: r, due: time.Now().Add(removalDelay)}
	time.AfterFunc(removalDelay, p.settle)
}

// settle removes from the view the members whose removal is due, unless
// this member is unsettled: then they wait until it is settled.
func (p *etcdProvider) settle() {
	p.viewMu.Lock()
	defer p.viewMu.Unlock()
	now := time.Now()
	changed := false
	for id, pr := range p.pending {
		switch {
		case now.Before(pr.due):
		case now.Before(p.unsettledUntil):
			pr.due = p.unsettledUntil
			p.pending[id] = pr
			time.AfterFunc(time.Until(pr.due), p.settle)
		default:
			delete(p.pending, id)
			changed = true
		}
	}
	if changed {
		p.publishLocked()
	}
}

// watch follows member keys from rev, resynchronising after any watch
// error (compaction, lost leader, etcd restart).
func (p *etcdProvider) watch(rev int64) {
	defer p.wg.Done()
	for p.ctx.Err() == nil {
		wch := p.client.Watch(clientv3.WithRequireLeader(p.ctx), p.prefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if resp.Err() != nil {
				p.log.Warn("cluster: etcd watch interrupted; resyncing", "error", resp.Err())
				break
			}
			selfGone := false
			p.viewMu.Lock()
			for _, ev := range resp.Events {
				id := strings.TrimPrefix(string(ev.Kv.Key), p.prefix())
				switch ev.Type {
				case clientv3.EventTypePut:
					var r record
					if err := json.Unmarshal(ev.Kv.Value, &r); err != nil || r.ID != id {
						p.log.Warn("cluster: ignoring malformed member key", "key", string(ev.Kv.Key))
						continue
					}
					p.putLocked(r)
				case clientv3.EventTypeDelete:
					if r, ok := p.members[id]; ok {
						p.goneLocked(r)
					}
					if id == p.SelfID() && ev.Kv.ModRevision > p.regRev.Load() {
						selfGone = true
						p.goneSeenAt.Store(time.Now().UnixNano())
					}
				}
			}
			p.publishLocked()
			p.viewMu.Unlock()
			if selfGone {
				// Our lease expired while we were paused or cut off, or
				// was revoked.
				p.lost(p.SelfID(), "own etcd key deleted")
			}
			rev = resp.Header.Revision
		}
		for p.ctx.Err() == nil {
			r, err := p.resync()
			if err == nil {
				rev = r
				p.viewMu.Lock()
				_, ok := p.members[p.SelfID()]
				p.viewMu.Unlock()
				if !ok {
					// The delete happened while the watch was down.
					p.lost(p.SelfID(), "own etcd key missing after resync")
				}
				break
			}
			p.log.Warn("cluster: etcd resync failed; retrying", "error", err)
			select {
			case <-p.ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// publishLocked hands the view (the members etcd lists and those whose
// removal is pending) to the member list; unchanged views are ignored
// there. viewMu is held.
func (p *etcdProvider) publishLocked() {
	ids := make([]string, 0, len(p.members)+len(p.pending))
	for id := range p.members {
		ids = append(ids, id)
	}
	for id := range p.pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ms := make([]*pcluster.Member, 0, len(ids))
	for _, id := range ids {
		r, ok := p.members[id]
		if !ok {
			r = p.pending[id].rec
		}
		ms = append(ms, r.member())
	}
	updateTopology(p.c, ms)
}

// Leave deletes this member's key and revokes its lease; the watch keeps
// running so the member still sees where its rooms went.
func (p *etcdProvider) Leave(ctx context.Context) error {
	p.mu.Lock()
	if p.leaving {
		p.mu.Unlock()
		return nil
	}
	p.leaving = true
	id, lease, kaCancel := p.self.ID, p.lease, p.kaCancel
	p.mu.Unlock()
	if kaCancel != nil {
		kaCancel()
	}
	ctx, cancel := context.WithTimeout(ctx, etcdOpTimeout)
	defer cancel()
	_, err := p.client.Delete(ctx, p.prefix()+id)
	if _, rerr := p.client.Revoke(ctx, lease); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("cluster: etcd deregister: %w", err)
	}
	return nil
}

// Kill stops renewing the lease and following the cluster, leaving the
// key to expire: what the others see of a crashed member.
func (p *etcdProvider) Kill() {
	p.mu.Lock()
	p.leaving = true
	p.mu.Unlock()
	p.stop()
}

// Shutdown is called by Cluster.Shutdown(true), after our drain has left.
func (p *etcdProvider) Shutdown(bool) error {
	err := p.Leave(context.Background())
	p.stop()
	return err
}

func (p *etcdProvider) stop() {
	p.cancel()
	p.wg.Wait()
	_ = p.client.Close()
}
