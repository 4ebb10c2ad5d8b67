package roomgrain

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/outboxmarks"
	"github.com/hyapp/roomcell/actors/storegate"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// hangingStore is a room database that stops answering marks while hung,
// as a paused MariaDB does: the call waits for its deadline.
type hangingStore struct {
	*memdb.Store
	mu   sync.Mutex
	hung chan struct{} // closed = answering
}

func newHangingStore() *hangingStore {
	h := &hangingStore{Store: memdb.New(), hung: make(chan struct{})}
	close(h.hung)
	return h
}

func (h *hangingStore) hang() {
	h.mu.Lock()
	h.hung = make(chan struct{})
	h.mu.Unlock()
}

func (h *hangingStore) release() {
	h.mu.Lock()
	close(h.hung)
	h.mu.Unlock()
}

func (h *hangingStore) wait(ctx context.Context) error {
	h.mu.Lock()
	c := h.hung
	h.mu.Unlock()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return persistence.ErrUnavailable
	}
}

func (h *hangingStore) MarkOutboxPublishedBatch(ctx context.Context, ids []string, nowMs int64) error {
	if err := h.wait(ctx); err != nil {
		return err
	}
	return h.Store.MarkOutboxPublishedBatch(ctx, ids, nowMs)
}

func shardJoin(cmdID, roomID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: roomID, UserId: user}}}
}

func pendingRows(t *testing.T, s interface {
	ListPendingOutbox(context.Context, int) ([]persistence.OutboxRow, error)
}) int {
	t.Helper()
	rows, err := s.ListPendingOutbox(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

// Each room writes to its shard's database only, and a database that
// hangs holds up only its own rooms: the other database's rooms answer
// and their marks land while it hangs (one mark batcher per database).
func TestShardedGrainsUseTheirDatabaseAndAHungOneHoldsOnlyItsRooms(t *testing.T) {
	f := newFixture(t)
	healthy, hung := memdb.New(), newHangingStore()
	f.deps.Config.StoreTimeout = 2 * time.Second
	onDB := map[string]int{"app/a": 0, "app/b": 1}
	props := ShardedGrainProps(f.deps, []ShardDB{
		{Store: healthy, StoreGate: storegate.New(healthy, storegate.Settings{}, nil), Marks: marksOf(healthy, f.deps)},
		{Store: hung, StoreGate: storegate.New(hung, storegate.Settings{}, nil), Marks: marksOf(hung, f.deps)}}, func(id string) int { return onDB[id] })
	activate := func(id string) *actor.PID {
		pid := f.sys.Root.Spawn(props)
		f.sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: id, Kind: Kind}})
		return pid
	}
	a, b := activate("app/a"), activate("app/b")
	create := func(pid *actor.PID, roomID string) {
		rc := rcCreate("create-"+roomID, "owner")
		rc.GetCreateRoom().RoomId = roomID
		f.mustDo(pid, rc)
	}
	create(a, "a")
	create(b, "b")
	for _, c := range []struct {
		store     persistence.RoomStore
		has, hasn string
	}{{healthy, "a", "b"}, {hung.Store, "b", "a"}} {
		if recs, err := c.store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: c.has}, 0); err != nil || len(recs) != 1 {
			t.Fatalf("room %s: %d commands in its database (%v), want 1", c.has, len(recs), err)
		}
		if recs, _ := c.store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: c.hasn}, 0); len(recs) != 0 {
			t.Fatalf("room %s: %d commands in the other room's database", c.hasn, len(recs))
		}
	}
	waitFor(t, func() bool { return pendingRows(t, healthy) == 0 && pendingRows(t, hung.Store) == 0 })

	hung.hang()
	f.mustDo(b, shardJoin("b-1", "b", "u1")) // its mark now waits on the hung database
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	for i := range 20 {
		f.mustDo(a, shardJoin("a-"+string(rune('a'+i)), "a", "u"+string(rune('a'+i))))
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("20 commands of the healthy database's room took %v while the other hung", d)
	}
	// Marks of the healthy database land while the other still hangs
	// (its StoreTimeout is 2 s; waitFor gives 3 s, so check the clock).
	waitFor(t, func() bool { return pendingRows(t, healthy) == 0 })
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("healthy database's marks landed after %v, behind the hung database's", d)
	}
	if n := pendingRows(t, hung.Store); n == 0 {
		t.Fatal("the hung database's row is marked although its mark never landed")
	}

	hung.release()
	f.mustDo(b, shardJoin("b-2", "b", "u2"))
	waitFor(t, func() bool { return pendingRows(t, hung.Store) == 0 })
	if recs, _ := hung.Store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "b"}, 0); len(recs) != 3 {
		t.Fatalf("room b: %d commands, want 3", len(recs))
	}
}

// marksOf is the mark batcher the node's wiring makes for a database.
func marksOf(s outboxmarks.Store, d Deps) *outboxmarks.Batcher {
	return outboxmarks.New(s, d.Clock, d.Config.StoreTimeout, d.Logger, OutboxWorker)
}
