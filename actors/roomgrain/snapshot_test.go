package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// snapRefusing is the dev store with a SaveSnapshot that fails while
// refusing is set, and an Append that fails whenever it carries a
// snapshot: a store that cannot take the room's state (too big for its
// packet or column).
type snapRefusing struct {
	*memdb.Store
	refusing atomic.Bool
	saves    atomic.Int64 // SaveSnapshot calls
}

func (s *snapRefusing) SaveSnapshot(ctx context.Context, snap persistence.Snapshot) error {
	s.saves.Add(1)
	if s.refusing.Load() {
		return errors.New("Error 1153: Got a packet bigger than 'max_allowed_packet' bytes")
	}
	return s.Store.SaveSnapshot(ctx, snap)
}

func (s *snapRefusing) Append(ctx context.Context, a persistence.Append) error {
	if a.Snapshot != nil {
		return errors.New("Error 1153: Got a packet bigger than 'max_allowed_packet' bytes")
	}
	return s.Store.Append(ctx, a)
}

func snapshotFixture(t *testing.T) (*fixture, *snapRefusing, *PublishMetrics) {
	f := newFixture(t)
	st := &snapRefusing{Store: f.store}
	m, err := NewPublishMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f.deps.Store, f.deps.PublishMetrics = st, m
	withGate(&f.deps) // the gate over the wrapped store
	return f, st, m
}

func rcBan(id, target string) *v1.RoomCommand {
	return wrap(&v1.BanUserRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: "owner", TargetUserId: target, BanSeconds: 3600})
}

// A store that refuses every snapshot fails no command: 60 commands are
// stored with SnapshotEvery 5; the snapshot is tried once every 5
// commands (not on every one), each refusal counted; once the store takes
// snapshots again the next one is written, and a new activation from it
// has the room as it was.
func TestSnapshotRefusedNeverFailsACommand(t *testing.T) {
	f, st, m := snapshotFixture(t)
	f.deps.Config.SnapshotEvery = 5
	st.refusing.Store(true)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	for i := range 59 {
		f.mustDo(pid, rcBan(fmt.Sprintf("b%d", i), fmt.Sprintf("u%02d", i)))
	}
	// The snapshot is written after the command's reply: wait for the
	// last one (seq 60).
	waitFor(t, func() bool { return testutil.ToFloat64(m.Snapshots.Failed.WithLabelValues("store")) >= 12 })
	if got := st.saves.Load(); got != 12 {
		t.Fatalf("%d snapshot tries in 60 commands, want 12 (every 5th)", got)
	}
	if got := testutil.ToFloat64(m.Snapshots.Failed.WithLabelValues("store")); got != 12 {
		t.Fatalf("store failures counted %v, want 12", got)
	}
	if n := testutil.CollectAndCount(m.Snapshots.Bytes); n != 1 {
		t.Fatalf("snapshot size histogram: %d series", n)
	}
	if _, err := f.store.LoadSnapshot(context.Background(), grainKey); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a snapshot was stored: %v", err)
	}
	st.refusing.Store(false)
	var last *v1.CommandReply
	for i := range 5 {
		last = f.mustDo(pid, rcBan(fmt.Sprintf("h%d", i), fmt.Sprintf("v%02d", i)))
	}
	waitFor(t, func() bool { _, err := f.store.LoadSnapshot(context.Background(), grainKey); return err == nil })
	snap, err := f.store.LoadSnapshot(context.Background(), grainKey)
	if err != nil || snap.Seq != last.RoomSeq || last.RoomSeq != 65 {
		t.Fatalf("after the store healed: snapshot seq %d (%v), head %d, want 65", snap.Seq, err, last.RoomSeq)
	}
	pid2 := f.activate("app/r1")
	if got := f.mustDo(pid2, rcGet()); got.RoomSeq != 65 {
		t.Fatalf("new activation at seq %d, want 65", got.RoomSeq)
	}
	if r, err := f.do(pid2, rcBan("b0", "u00")); err != nil || !r.Duplicate {
		t.Fatalf("a retried ban after the reload: %+v %v", r, err)
	}
}

// A snapshot over room.snapshot_max_bytes is not sent at all: counted
// too_big, the commands stored.
func TestSnapshotOverTheLimitIsNotSent(t *testing.T) {
	f, st, m := snapshotFixture(t)
	f.deps.Config.SnapshotEvery = 2
	f.deps.Config.SnapshotMaxBytes = 100 // less than any room's state
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	for i := range 9 {
		f.mustDo(pid, rcBan(fmt.Sprintf("b%d", i), fmt.Sprintf("user-with-a-long-name-%02d", i)))
	}
	waitFor(t, func() bool { return testutil.ToFloat64(m.Snapshots.Failed.WithLabelValues("too_big")) >= 5 })
	if st.saves.Load() != 0 {
		t.Fatalf("%d snapshots sent over the limit", st.saves.Load())
	}
	if got := testutil.ToFloat64(m.Snapshots.Failed.WithLabelValues("too_big")); got != 5 {
		t.Fatalf("too_big counted %v, want 5 (seqs 2, 4, ... 10)", got)
	}
}
