package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/cluster"
	grainkind "github.com/hyapp/roomcell/cluster/kind"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// fixedOwners names one owner for every room; the test moves it.
type fixedOwners struct {
	mu    sync.Mutex
	owner string
}

func (o *fixedOwners) Owner(string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owner
}
func (o *fixedOwners) Changed() <-chan struct{} { return nil }
func (o *fixedOwners) set(owner string) {
	o.mu.Lock()
	o.owner = owner
	o.mu.Unlock()
}

// localCluster is a one-member cluster of room grains on store with lease,
// and a client following owners.
func localCluster(t *testing.T, store *memdb.Store, lease Lease, owners Owners) *Client {
	t.Helper()
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	deps := Deps{Store: store, Gifts: fixedHeat(1), Config: cfg.Room, Lease: lease}
	m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(Kind, GrainProps(deps))}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(false) })
	return &Client{Cluster: m.Cluster, AttemptTimeout: 2 * time.Second, Owners: owners}
}

// The direct path to a grain is taken only for the activation the cluster
// placed on this node, while it lives and while this node owns the room;
// otherwise the command takes the cluster's path, and either way it is
// answered.
func TestLocalGrainOnlyForThisNodesLiveActivationOfAnOwnedRoom(t *testing.T) {
	owners := &fixedOwners{}
	c := localCluster(t, memdb.New(), nil, owners)
	self := c.Cluster.ActorSystem.Address()
	owners.set(self)
	ctx := context.Background()
	if _, _, ok := c.localGrain("app/r1"); ok {
		t.Fatal("direct path before the room was activated anywhere")
	}
	if _, err := c.Execute(ctx, rcCreate("c1", "owner")); err != nil {
		t.Fatal(err)
	}
	_, pid, ok := c.localGrain("app/r1")
	if !ok {
		t.Fatal("no direct path to the room's grain active on this node")
	}

	owners.set("10.0.0.9:4000")
	if _, _, ok := c.localGrain("app/r1"); ok {
		t.Fatal("direct path taken while the ownership table names another node")
	}
	owners.set("")
	if _, _, ok := c.localGrain("app/r1"); ok {
		t.Fatal("direct path taken while the ownership table names no owner")
	}
	owners.set(self)

	// The grain stops (passivation, rebalance): no direct path to it; the
	// next command activates it again through the cluster.
	if err := c.Cluster.ActorSystem.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if p, stale, ok := c.localGrain("app/r1"); ok && stale.Equal(pid) {
		t.Fatalf("direct path to a stopped grain %v (%T)", stale, p)
	}
	r, err := c.Execute(ctx, rcJoin("c2", "bob"))
	if err != nil || r.RoomSeq != 2 {
		t.Fatalf("JoinRoom after the grain stopped: %v, %v; want seq 2", r, err)
	}
}

// Through the direct path, as through the cluster's: every command once,
// concurrent duplicates answered with the one recorded outcome.
func TestLocalPathCommandsOnceUnderConcurrentDuplicates(t *testing.T) {
	store := memdb.New()
	owners := &fixedOwners{}
	c := localCluster(t, store, nil, owners)
	owners.set(c.Cluster.ActorSystem.Address())
	ctx := context.Background()
	if _, err := c.Execute(ctx, rcCreate("c0", "owner")); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.localGrain("app/r1"); !ok {
		t.Fatal("no direct path after the create")
	}
	const users, copies = 64, 3
	seqs := make([][copies]int64, users)
	var wg sync.WaitGroup
	errs := make(chan error, users*copies)
	for u := range users {
		for k := range copies {
			wg.Go(func() {
				r, err := c.Execute(ctx, rcJoin(fmt.Sprint("j", u), fmt.Sprint("u", u)))
				if err != nil {
					errs <- err
					return
				}
				seqs[u][k] = r.RoomSeq
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for u, s := range seqs {
		for k := 1; k < copies; k++ {
			if s[k] != s[0] {
				t.Fatalf("user %d's join answered seqs %v: duplicates must share one outcome", u, s)
			}
		}
		if seen[s[0]] {
			t.Fatalf("seq %d answered for two different joins", s[0])
		}
		seen[s[0]] = true
	}
	recs, err := store.LoadCommands(ctx, grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+users {
		t.Fatalf("log has %d commands, want %d (create + one per user)", len(recs), 1+users)
	}
}

// The direct path does not pass the grain's own checks by: a node whose
// lease of the room is gone while its ownership view still names it (the
// worst case, a stale table) is refused by its grain, and nothing is
// written.
func TestLocalPathKeepsTheLeaseFence(t *testing.T) {
	store := memdb.New()
	lease := &fakeLease{epoch: 5, ok: true}
	owners := &fixedOwners{}
	c := localCluster(t, store, lease, owners)
	owners.set(c.Cluster.ActorSystem.Address())
	if _, err := c.Execute(context.Background(), rcCreate("c1", "owner")); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.localGrain("app/r1"); !ok {
		t.Fatal("no direct path before the lease is lost")
	}
	lease.set(5, false)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if r, err := c.Execute(ctx, rcJoin("c2", "bob")); !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("JoinRoom without the lease: %v, %v; want unavailable", r, err)
	}
	recs, err := store.LoadCommands(context.Background(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("log has %d commands, want 1: the grain wrote without its lease", len(recs))
	}
}
