package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/storegate"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// probe records every non-lifecycle message it receives (Proto.Actor's probe-actor testing pattern).
type probe struct{ ch chan any }

type watch struct{ pid *actor.PID }

func (p *probe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case watch:
		ctx.Watch(m.pid)
	default:
		p.ch <- m
	}
}

func expect[T any](t *testing.T, ch chan any, d time.Duration) T {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case m := <-ch:
			if v, ok := m.(T); ok {
				return v
			}
		case <-deadline:
			var zero T
			t.Fatalf("no %T within %s", zero, d)
			return zero
		}
	}
}

// probePublisher forwards every publish attempt to a probe and fails while
// failing is set.
type probePublisher struct {
	root    *actor.RootContext
	probe   *actor.PID
	failing atomic.Bool
}

type published struct {
	env persistence.Envelope
	err error
}

func (p *probePublisher) PublishRoomEvent(_ context.Context, env persistence.Envelope) error {
	var err error
	if p.failing.Load() {
		err = errors.New("im down")
	}
	p.root.Send(p.probe, published{env: env, err: err})
	return err
}

// countingWallet counts holds per command_id and keeps each gift's
// settlement, refusing to settle a gift both ways.
type countingWallet struct {
	mu      sync.Mutex
	calls   map[string]int    // HoldGift calls that reserved or found a reservation
	settled map[string]string // command_id -> "confirmed" / "refunded"
	fail    error
}

func (w *countingWallet) HoldGift(_ context.Context, d GiftDebit) (GiftCharge, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail != nil {
		return GiftCharge{}, w.fail
	}
	if w.calls == nil {
		w.calls = map[string]int{}
	}
	if w.settled[d.CommandID] == "refunded" {
		return GiftCharge{}, room.ErrGiftRefunded
	}
	w.calls[d.CommandID]++
	return GiftCharge{Heat: 10 * d.Count, Value: 10 * d.Count}, nil
}

func (w *countingWallet) settle(commandID, how string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.settled == nil {
		w.settled = map[string]string{}
	}
	if prev := w.settled[commandID]; prev != "" && prev != how {
		return fmt.Errorf("%w: gift %s already %s, now %s", errclass.Precondition, commandID, prev, how)
	}
	w.settled[commandID] = how
	return nil
}

func (w *countingWallet) ConfirmGift(_ context.Context, _, commandID string) error {
	return w.settle(commandID, "confirmed")
}

func (w *countingWallet) RefundGift(_ context.Context, _, commandID string) error {
	return w.settle(commandID, "refunded")
}

func (w *countingWallet) outcome(commandID string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.settled[commandID]
}

type fixture struct {
	t      testing.TB
	sys    *actor.ActorSystem
	store  *memdb.Store
	pub    *probePublisher
	wallet *countingWallet
	events chan any
	probe  *actor.PID
	deps   Deps
}

func newFixture(t testing.TB) *fixture {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	f := &fixture{t: t, sys: sys, store: memdb.New(), wallet: &countingWallet{}, events: make(chan any, 1024)}
	f.probe = sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &probe{ch: f.events} }))
	f.pub = &probePublisher{root: sys.Root, probe: f.probe}
	cfg := configs.Default().Room
	f.deps = Deps{Store: f.store, Publisher: f.pub, Gifts: f.wallet, Config: cfg, Guesses: memdb.NewGuesses()}
	f.deps.setDefaults()
	withGate(&f.deps)
	t.Cleanup(sys.Shutdown)
	return f
}

// withGate gives d the store gate the node's wiring makes for its
// store (cmd/roomcell), replacing any it had.
func withGate(d *Deps) {
	d.StoreGate = storegate.New(d.Store, storegate.Settings{StallAfter: d.Config.StoreStallAfter, ProbeTimeout: d.Config.StoreProbeTimeout}, d.Logger)
}

// activate spawns one activation of a room grain directly, as the
// cluster's placement actor would, and sends it ClusterInit.
func (f *fixture) activate(identity string) *actor.PID {
	d := f.deps // this activation's, as the tests change f.deps between them
	if ObserveLikes != nil {
		d.Observers = append(slices.Clone(d.Observers), ObserveLikes(d.Config.LikeWindow))
	}
	pid := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &grain{deps: &d} }))
	f.sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: identity, Kind: Kind}})
	return pid
}

func (f *fixture) do(pid *actor.PID, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	f.t.Helper()
	res, err := f.sys.Root.RequestFuture(pid, rc, 5*time.Second).Result()
	if err != nil {
		f.t.Fatalf("grain did not answer: %v", err)
	}
	return replyOf(res)
}

func (f *fixture) mustDo(pid *actor.PID, rc *v1.RoomCommand) *v1.CommandReply {
	f.t.Helper()
	r, err := f.do(pid, rc)
	if err != nil {
		f.t.Fatalf("command failed: %v", err)
	}
	return r
}

func rcCreate(cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: user, Name: "Room One"}}}
}

func rcJoin(cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: user}}}
}

func rcGift(cmdID, from, to string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_SendGift{SendGift: &v1.SendGiftRequest{
		CommandId: cmdID, AppCode: "app", RoomId: "r1", UserId: from, ToUserId: to, GiftId: "rose", GiftCount: 2}}}
}

func rcGet() *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}}
}

var grainKey = persistence.RoomKey{AppCode: "app", RoomID: "r1"}

func TestGrainDuplicateCommandReturnsRecordedReplyAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	first := f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("c2", "bob"))
	g1 := f.mustDo(pid, rcGift("c3", "owner", "bob"))

	again := f.mustDo(pid, rcCreate("c1", "owner"))
	if !again.Duplicate || again.RoomSeq != first.RoomSeq || len(again.EventIds) != len(first.EventIds) || again.EventIds[0] != first.EventIds[0] {
		t.Fatalf("retry of c1: got %+v, want the recorded reply of %+v marked duplicate", again, first)
	}
	g2 := f.mustDo(pid, rcGift("c3", "owner", "bob"))
	if !g2.Duplicate || g2.RoomSeq != g1.RoomSeq {
		t.Fatalf("retry of gift: got seq %d dup %v, want seq %d dup", g2.RoomSeq, g2.Duplicate, g1.RoomSeq)
	}
	if n := f.wallet.calls["c3"]; n != 1 {
		t.Fatalf("wallet charged %d times for c3, want 1", n)
	}
	recs, err := f.store.LoadCommands(context.Background(), grainKey, 0)
	if err != nil || len(recs) != 3 {
		t.Fatalf("log has %d records (err %v), want 3", len(recs), err)
	}

	// A new activation has no memory of c1: the store must still answer it.
	pid2 := f.activate("app/r1")
	again2 := f.mustDo(pid2, rcCreate("c1", "owner"))
	if !again2.Duplicate || again2.RoomSeq != 1 {
		t.Fatalf("retry after reactivation: got %+v, want recorded seq 1 reply", again2)
	}
	if recs, _ := f.store.LoadCommands(context.Background(), grainKey, 0); len(recs) != 3 {
		t.Fatalf("log has %d records after duplicate, want 3", len(recs))
	}
}

func TestGrainFencingSecondWriterIsRejectedAndReloads(t *testing.T) {
	f := newFixture(t)
	a := f.activate("app/r1")
	f.mustDo(a, rcCreate("c1", "owner"))
	b := f.activate("app/r1") // a second activation, loaded at seq 1
	f.mustDo(b, rcGet())

	f.mustDo(a, rcJoin("c2", "alice")) // a takes seq 2
	_, err := f.do(b, rcJoin("c3", "bob"))
	if !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("second writer of seq 2: got %v, want ErrUnavailable", err)
	}
	// b reloaded: the retry lands at seq 3 on top of a's write.
	r := f.mustDo(b, rcJoin("c3", "bob"))
	if r.RoomSeq != 3 {
		t.Fatalf("retry after fence: seq %d, want 3", r.RoomSeq)
	}
	if got := f.mustDo(b, rcGet()).Room.Members; len(got) != 3 || r.Room.MemberCount != 3 {
		t.Fatalf("members after reload %v, want owner, alice, bob", got)
	}
	recs, _ := f.store.LoadCommands(context.Background(), grainKey, 0)
	for i, rec := range recs {
		if rec.Seq != int64(i+1) {
			t.Fatalf("log seqs not contiguous: %d at %d", rec.Seq, i)
		}
	}
	if len(recs) != 3 {
		t.Fatalf("log has %d records, want 3", len(recs))
	}
}

func TestGrainRecoversAfterPassivationFromSnapshotAndEvents(t *testing.T) {
	f := newFixture(t)
	f.deps.Config.IdleTimeout = 150 * time.Millisecond
	f.deps.Config.SnapshotEvery = 3
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	for i, u := range []string{"u1", "u2", "u3", "u4"} {
		f.mustDo(pid, rcJoin("j"+string(rune('0'+i)), u))
	}
	before := f.mustDo(pid, rcGet())
	f.sys.Root.Send(f.probe, watch{pid: pid})
	expect[*actor.Terminated](t, f.events, 3*time.Second)

	snap, err := f.store.LoadSnapshot(context.Background(), grainKey)
	if err != nil || snap.Seq != before.RoomSeq {
		t.Fatalf("passivation snapshot: seq %d err %v, want seq %d", snap.Seq, err, before.RoomSeq)
	}
	// Recovery from an older snapshot plus recorded events must give the
	// same state as recovery from the newest one.
	mid, _ := f.store.LoadCommands(context.Background(), grainKey, 0)
	_ = mid
	pid2 := f.activate("app/r1")
	after := f.mustDo(pid2, rcGet())
	if after.RoomSeq != before.RoomSeq || len(after.Room.Members) != 5 || after.Room.Name != "Room One" {
		t.Fatalf("after reactivation: %+v, want %+v", after.Room, before.Room)
	}
}

func TestGrainReplaysEventsAfterSnapshot(t *testing.T) {
	f := newFixture(t)
	f.deps.Config.SnapshotEvery = 2 // snapshot at seq 2, events 3..5 replayed
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("c2", "bob"))
	f.mustDo(pid, rcGift("c3", "owner", "bob"))
	f.mustDo(pid, rcJoin("c4", "carol"))
	live := f.mustDo(pid, rcGift("c5", "bob", "carol"))
	if snap, err := f.store.LoadSnapshot(context.Background(), grainKey); err != nil || snap.Seq != 4 {
		t.Fatalf("snapshot seq %d err %v, want 4", snap.Seq, err)
	}
	pid2 := f.activate("app/r1")
	got := f.mustDo(pid2, rcGet())
	if got.Room.Heat != live.Room.Heat || got.RoomSeq != 5 || len(got.Room.Members) != 3 {
		t.Fatalf("replayed %+v, want %+v", got.Room, live.Room)
	}
}

func TestGrainPublisherFailureLeavesRowPendingWithRetryCountUntouched(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	for range 2 { // RoomCreated (inline) and RoomUserJoined (child)
		if p := expect[published](t, f.events, 2*time.Second); p.err != nil {
			t.Fatalf("publish failed: %v", p.err)
		}
	}
	f.pub.failing.Store(true)
	r := f.mustDo(pid, rcJoin("c2", "bob")) // the command succeeds although IM is down
	p := expect[published](t, f.events, 2*time.Second)
	if p.err == nil || p.env.EventID != r.EventIds[0] {
		t.Fatalf("publish attempt %+v, want failed attempt of %s", p, r.EventIds[0])
	}
	waitFor(t, func() bool {
		row, err := f.store.GetOutbox(context.Background(), r.EventIds[0])
		return err == nil && row.Status == persistence.OutboxPending
	})
	row, _ := f.store.GetOutbox(context.Background(), r.EventIds[0])
	if row.RetryCount != 0 || row.Status != persistence.OutboxPending {
		t.Fatalf("row after failed sync publish: %+v, want pending with retry_count 0", row)
	}
	// The earlier successful publishes were marked published.
	waitFor(t, func() bool {
		row, err := f.store.GetOutbox(context.Background(), room.EventID("app", "r1", 1, 1))
		return err == nil && row.Status == persistence.OutboxPublished
	})
}

func TestGrainGiftChargesWalletOnceAndInsufficientChangesNothing(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("c2", "bob"))
	r := f.mustDo(pid, rcGift("g1", "owner", "bob"))
	// The gift, the heat, and (the room's first gift) its new leader.
	if r.Room.Heat != 20 || len(r.EventIds) != 3 || r.Events[0].EventType != room.TypeRoomGiftSent ||
		r.Events[1].EventType != room.TypeRoomHeatChanged || r.Events[2].EventType != room.TypeRoomTopContributorsChanged {
		t.Fatalf("gift reply %+v, want heat 20 and 3 events", r)
	}
	f.wallet.fail = errclass.Precondition
	_, err := f.do(pid, rcGift("g2", "owner", "bob"))
	if !errors.Is(err, errclass.Precondition) {
		t.Fatalf("gift without funds: %v, want ErrPrecondition", err)
	}
	got := f.mustDo(pid, rcGet())
	if got.RoomSeq != 3 || got.Room.Heat != 20 {
		t.Fatalf("state after refused gift: seq %d heat %d, want 3 and 20", got.RoomSeq, got.Room.Heat)
	}
	// A rule error is checked before the wallet is charged.
	f.wallet.fail = nil
	_, err = f.do(pid, rcGift("g3", "owner", "nobody"))
	if !errors.Is(err, room.ErrReceiverAbsent) || f.wallet.calls["g3"] != 0 {
		t.Fatalf("gift to non-member: err %v, charges %d; want ErrReceiverAbsent and no charge", err, f.wallet.calls["g3"])
	}
}

func TestGrainStoreDownAnswersUnavailableThenRecovers(t *testing.T) {
	f := newFixture(t)
	flaky := &flakyStore{Store: f.store}
	f.deps.Store = flaky
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	flaky.down.Store(true)
	if _, err := f.do(pid, rcJoin("c2", "bob")); !errors.Is(err, errclass.Unavailable) {
		t.Fatalf("store down: %v, want ErrUnavailable", err)
	}
	flaky.down.Store(false)
	r := f.mustDo(pid, rcJoin("c2", "bob"))
	if r.RoomSeq != 2 || r.Duplicate {
		t.Fatalf("after store is back: %+v, want seq 2", r)
	}
}

type flakyStore struct {
	*memdb.Store
	down atomic.Bool
}

func (s *flakyStore) Append(ctx context.Context, a persistence.Append) error {
	if s.down.Load() {
		return persistence.ErrUnavailable
	}
	return s.Store.Append(ctx, a)
}

func (s *flakyStore) LoadSnapshot(ctx context.Context, k persistence.RoomKey) (persistence.Snapshot, error) {
	if s.down.Load() {
		return persistence.Snapshot{}, persistence.ErrUnavailable
	}
	return s.Store.LoadSnapshot(ctx, k)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 3s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fixedHeat is a wallet that charges nothing and returns heat per gift.
type fixedHeat = FreeGifts
