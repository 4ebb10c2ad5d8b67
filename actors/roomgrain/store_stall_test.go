package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/actors/storegate"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// frozenStore is a room database that stops answering, as a SIGSTOPped
// MariaDB does: while stalled every call (and the gate's probe) waits for
// its deadline; an append is committed all the same — its
// acknowledgement is what never comes, so its outcome is unknown to the
// caller — as a commit packet already in the frozen server's socket is
// when it resumes.
type frozenStore struct {
	*memdb.Store
	mu      sync.Mutex
	stalled chan struct{} // closed = answering
}

func newFrozenStore() *frozenStore {
	s := &frozenStore{Store: memdb.New(), stalled: make(chan struct{})}
	close(s.stalled)
	return s
}

func (s *frozenStore) stall() {
	s.mu.Lock()
	s.stalled = make(chan struct{})
	s.mu.Unlock()
}

func (s *frozenStore) answer() {
	s.mu.Lock()
	close(s.stalled)
	s.mu.Unlock()
}

func (s *frozenStore) wait(ctx context.Context) error {
	s.mu.Lock()
	c := s.stalled
	s.mu.Unlock()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stalled store: %w: %w", persistence.ErrUnavailable, ctx.Err())
	}
}

func (s *frozenStore) Probe(ctx context.Context) error { return s.wait(ctx) }

func (s *frozenStore) Append(ctx context.Context, a persistence.Append) error {
	s.mu.Lock()
	c := s.stalled
	s.mu.Unlock()
	select {
	case <-c:
		return s.Store.Append(ctx, a)
	default:
	}
	// Committed, but the acknowledgement waits for the store to answer.
	err := s.Store.Append(context.Background(), a)
	if werr := s.wait(ctx); werr != nil {
		return werr
	}
	return err
}

func (s *frozenStore) FenceRoom(ctx context.Context, key persistence.RoomKey, epoch int64) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.FenceRoom(ctx, key, epoch)
}

func (s *frozenStore) LoadSnapshot(ctx context.Context, key persistence.RoomKey) (persistence.Snapshot, error) {
	if err := s.wait(ctx); err != nil {
		return persistence.Snapshot{}, err
	}
	return s.Store.LoadSnapshot(ctx, key)
}

func (s *frozenStore) LoadCommands(ctx context.Context, key persistence.RoomKey, after int64) ([]persistence.CommandRecord, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.LoadCommands(ctx, key, after)
}

func (s *frozenStore) FindCommand(ctx context.Context, key persistence.RoomKey, id string) (persistence.CommandRecord, error) {
	if err := s.wait(ctx); err != nil {
		return persistence.CommandRecord{}, err
	}
	return s.Store.FindCommand(ctx, key, id)
}

// frozenRooms is the stall tests' setting: a stalling store, its gate
// (the node's defaults), rooms held under a lease at epoch 3, and the
// bound within which a call must be answered while the store stalls.
func frozenRooms(t *testing.T) (*frozenStore, *actor.ActorSystem, Deps, time.Duration) {
	store := newFrozenStore()
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	d := Deps{Store: store, Publisher: newIMRecorder(time.Millisecond), Gifts: FreeGifts(1), Config: configs.Default().Room,
		Lease: &fakeLease{epoch: 3, ok: true}}
	d.setDefaults()
	d.StoreGate = storegate.New(store, storegate.Settings{}, nil)
	return store, sys, d, d.Config.StoreStallAfter + d.Config.StoreProbeTimeout + 250*time.Millisecond
}

// raise sets a to v if v is higher.
func raise(a *atomic.Int64, v int64) {
	for cur := a.Load(); v > cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}

// A room database stops answering under writes and reads of 12 rooms
// held under a lease (so a reload raises the epoch fence first): every
// write sent while it stalls is answered within the gate's bound
// (room.store_stall_after + room.store_probe_timeout, plus scheduling),
// refused with ROOM_STORE_DOWN once the gate closed (or, caught in
// flight, unavailable with its outcome unknown), never at the 3 s store
// timeout; every read is answered from the rooms' state, never stale —
// also for rooms whose reload (and its fence) the stall cut short. When
// the store answers again the gate opens within a probe, every write is
// retried with its command_id until acknowledged, and each is in the log
// once, at the seq its ack named, the writes whose outcome was unknown
// included (answered as duplicates of their commit).
func TestStalledStoreReadsAnswerWritesRefusedFast(t *testing.T) {
	store, sys, d, bound := frozenRooms(t)

	const rooms = 12
	pids := make([]*actor.PID, rooms)
	var acked [rooms]atomic.Int64
	ask := func(i int, rc *v1.RoomCommand) (*v1.CommandReply, error) {
		res, err := sys.Root.RequestFuture(pids[i], rc, 10*time.Second).Result()
		if err != nil {
			return nil, err
		}
		return replyOf(res)
	}
	for i := range pids {
		dd := d
		pids[i] = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &grain{deps: &dd} }))
		sys.Root.Send(pids[i], &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: fmt.Sprintf("app/s%02d", i), Kind: Kind}})
		r, err := ask(i, rcCreateIn(fmt.Sprintf("s%02d", i)))
		if err != nil {
			t.Fatal(err)
		}
		acked[i].Store(r.RoomSeq)
	}

	type call struct {
		at, end time.Time
		err     error
		write   bool
	}
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		calls   []call
		stale   []string
		pending = map[string]int{} // command ids not acknowledged yet → room
		ackedAt = map[string]int64{}
	)
	record := func(c call) {
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}
	for w := range 8 {
		wg.Add(2)
		go func() { // writer
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				i, id := rand.IntN(rooms), fmt.Sprintf("w%d-%d", w, n)
				start := time.Now()
				r, err := ask(i, rcJoinIn(fmt.Sprintf("s%02d", i), id, "u"+id))
				record(call{at: start, end: time.Now(), err: err, write: true})
				mu.Lock()
				if err == nil {
					ackedAt[id] = r.RoomSeq
				} else {
					pending[id] = i
				}
				mu.Unlock()
				if err == nil {
					raise(&acked[i], r.RoomSeq)
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
		go func() { // reader
			defer wg.Done()
			for !stop.Load() {
				i := rand.IntN(rooms)
				floor := acked[i].Load()
				start := time.Now()
				r, err := ask(i, rcGetIn(fmt.Sprintf("s%02d", i)))
				record(call{at: start, end: time.Now(), err: err})
				if err == nil && r.RoomSeq < floor {
					mu.Lock()
					stale = append(stale, fmt.Sprintf("s%02d answered seq %d after seq %d was acknowledged", i, r.RoomSeq, floor))
					mu.Unlock()
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	store.stall()
	stalled := time.Now()
	time.Sleep(2 * time.Second)
	store.answer()
	answered := time.Now()
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()

	var writes, refusedDown, unknown, slowWrites, reads, failedReads, slowReads int
	var slowestWrite, slowestRead time.Duration
	firstAck := time.Duration(-1)
	for _, c := range calls {
		took := c.end.Sub(c.at)
		if !c.at.Before(stalled) && c.at.Before(answered) {
			if c.write {
				writes++
				slowestWrite = max(slowestWrite, took)
				switch {
				case errors.Is(c.err, storegate.ErrDown) || errclass.CodeOf(c.err) == errclass.CodeRoomStoreDown:
					refusedDown++
				case errclass.Name(c.err) == "unavailable":
					unknown++
				default:
					t.Errorf("a write sent during the stall answered %v", c.err)
				}
				if took > bound {
					slowWrites++
				}
				continue
			}
			reads++
			slowestRead = max(slowestRead, took)
			if c.err != nil {
				failedReads++
				if failedReads <= 5 {
					t.Errorf("a read %s into the stall failed after %s: %v", c.at.Sub(stalled).Round(time.Millisecond), took.Round(time.Millisecond), c.err)
				}
			}
			if took > bound {
				slowReads++
			}
		}
		if c.write && c.err == nil && c.end.After(answered) {
			if d := c.end.Sub(answered); firstAck < 0 || d < firstAck {
				firstAck = d
			}
		}
	}
	t.Logf("during the 2 s stall: %d writes (%d refused ROOM_STORE_DOWN, %d unavailable in flight; slowest %s), %d reads (%d failed; slowest %s); bound %s; first write acknowledged %s after the store answered",
		writes, refusedDown, unknown, slowestWrite.Round(time.Millisecond), reads, failedReads, slowestRead.Round(time.Millisecond), bound, firstAck.Round(time.Millisecond))
	if writes == 0 || refusedDown == 0 || slowWrites != 0 {
		t.Errorf("writes during the stall: %d sent, %d refused ROOM_STORE_DOWN, %d over %s; want all answered within it", writes, refusedDown, slowWrites, bound)
	}
	if reads < 100 || failedReads != 0 || slowReads != 0 {
		t.Errorf("reads during the stall: %d sent, %d failed, %d over %s; want many, all answered within it", reads, failedReads, slowReads, bound)
	}
	if len(stale) != 0 {
		t.Errorf("%d stale reads: %v", len(stale), stale[:min(5, len(stale))])
	}
	if firstAck < 0 || firstAck > storegate.ProbeEvery+d.Config.StoreProbeTimeout+250*time.Millisecond {
		t.Errorf("first write acknowledged %s after the store answered; want within a probe", firstAck)
	}

	// Every write not acknowledged is retried with its command_id: each
	// lands once, the ones whose commit the stall hid as duplicates.
	dups := 0
	for id, i := range pending {
		r, err := ask(i, rcJoinIn(fmt.Sprintf("s%02d", i), id, "u"+id))
		if err != nil {
			t.Fatalf("retry of %s after the stall: %v", id, err)
		}
		if r.Duplicate {
			dups++
		}
		ackedAt[id] = r.RoomSeq
	}
	for i := range rooms {
		key := persistence.RoomKey{AppCode: "app", RoomID: fmt.Sprintf("s%02d", i)}
		recs, err := store.Store.LoadCommands(context.Background(), key, 0)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range recs {
			if r.Seq != int64(j+1) {
				t.Fatalf("%s: log seq %d at position %d: gap or duplicate", key, r.Seq, j)
			}
			if seq, ok := ackedAt[r.CommandID]; r.CommandType == room.CmdJoinRoom && (!ok || seq != r.Seq) {
				t.Fatalf("%s: %s logged at seq %d, acknowledged at %d (%v)", key, r.CommandID, r.Seq, seq, ok)
			}
		}
	}
	t.Logf("%d writes retried after the stall, %d of them answered as duplicates of a commit the stall hid; %d acknowledged in all, each logged once at its seq",
		len(pending), dups, len(ackedAt))
}

// A reload the stall cuts short never takes the room's reads with it. A
// room whose append the stall left unsure reloads before its next write;
// when the store stalls again during that reload (its epoch fence first),
// the gate abandons it, and the room keeps answering reads from the state
// it had (every acknowledged write), with the epoch that state was
// loaded under: the failed claim must not make the state look stale.
// Reads sent while the reload waits are answered within the gate's bound.
func TestReloadCutShortByAStallKeepsTheRoomsReads(t *testing.T) {
	store, sys, d, bound := frozenRooms(t)
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &grain{deps: &d} }))
	sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: "app/r1", Kind: Kind}})
	ask := func(rc *v1.RoomCommand) (*v1.CommandReply, time.Duration, error) {
		start := time.Now()
		res, err := sys.Root.RequestFuture(pid, rc, 10*time.Second).Result()
		if err != nil {
			return nil, time.Since(start), err
		}
		r, err := replyOf(res)
		return r, time.Since(start), err
	}
	if _, _, err := ask(rcCreateIn("r1")); err != nil {
		t.Fatal(err)
	}
	last, _, err := ask(rcJoinIn("r1", "j1", "u1"))
	if err != nil {
		t.Fatal(err)
	}

	// An append caught by the stall: its outcome unknown, the room unsure.
	store.stall()
	if _, took, err := ask(rcJoinIn("r1", "j2", "u2")); errclass.Name(err) != "unavailable" || took > bound {
		t.Fatalf("the append caught by the stall answered %v after %s; want unavailable within %s", err, took, bound)
	}
	store.answer()
	time.Sleep(storegate.ProbeEvery + d.Config.StoreProbeTimeout + 100*time.Millisecond) // the gate opens

	// The next write reloads first; the store stalls again during it.
	store.stall()
	write := make(chan error, 1)
	go func() { _, _, err := ask(rcJoinIn("r1", "j3", "u3")); write <- err }()
	time.Sleep(20 * time.Millisecond) // the reload is waiting on the fence
	for n := range 5 {
		r, took, err := ask(rcGetIn("r1"))
		if err != nil || took > bound {
			t.Fatalf("read %d during the cut-short reload: %v after %s; want an answer within %s", n, err, took, bound)
		}
		if r.RoomSeq < last.RoomSeq {
			t.Fatalf("read %d answered seq %d; seq %d was acknowledged", n, r.RoomSeq, last.RoomSeq)
		}
	}
	if err := <-write; err == nil {
		t.Fatal("a write whose reload the stall cut short was acknowledged")
	}
	for n := range 20 {
		r, took, err := ask(rcGetIn("r1"))
		if err != nil || took > 50*time.Millisecond {
			t.Fatalf("read %d after the reload was cut short: %v after %s; want the state in memory at once", n, err, took)
		}
		if r.RoomSeq < last.RoomSeq {
			t.Fatalf("read %d answered seq %d; seq %d was acknowledged", n, r.RoomSeq, last.RoomSeq)
		}
	}
	// Writes are refused at once while the store is away, and land after.
	if _, took, err := ask(rcJoinIn("r1", "j4", "u4")); errclass.CodeOf(err) != errclass.CodeRoomStoreDown || took > 50*time.Millisecond {
		t.Fatalf("a write with the gate closed: %v after %s; want ROOM_STORE_DOWN at once", err, took)
	}
	store.answer()
	time.Sleep(storegate.ProbeEvery + d.Config.StoreProbeTimeout + 100*time.Millisecond)
	r, _, err := ask(rcJoinIn("r1", "j2", "u2"))
	if err != nil || !r.Duplicate {
		t.Fatalf("the retry of the append the stall hid: %+v, %v; want its commit answered as a duplicate", r, err)
	}
}
