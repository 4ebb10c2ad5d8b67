package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyapp/roomcell/persistence"
)

// A room's snapshot is written in a store call of its own, after the
// command it follows has committed and been answered, never inside the
// command's append: a snapshot the store cannot take (bigger than
// room.snapshot_max_bytes, than the database's max_allowed_packet or
// its column, or a store that fails just then) costs a longer replay on
// the next activation, never a command. The room then tries again
// SnapshotEvery commands later, so a store that keeps refusing is not
// asked on every command. The state holds only what every acknowledged
// append wrote, so a snapshot at its seq is right whichever node writes
// it, and the store keeps only a newer one.

// errSnapshotTooBig is a snapshot over room.snapshot_max_bytes: not sent.
var errSnapshotTooBig = errors.New("room snapshot over room.snapshot_max_bytes")

// SnapshotMetrics describe the rooms' snapshots.
type SnapshotMetrics struct {
	// Bytes is the size of each snapshot the rooms tried to write.
	Bytes prometheus.Histogram
	// Failed counts snapshots not written, by reason: too_big (over
	// room.snapshot_max_bytes, not sent) or store (the store refused or
	// failed).
	Failed *prometheus.CounterVec
}

func newSnapshotMetrics(reg prometheus.Registerer) (*SnapshotMetrics, error) {
	m := &SnapshotMetrics{
		Bytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "roomcell_room_snapshot_bytes",
			Help:    "Size of the room snapshots the rooms tried to write (JSON state, bytes).",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 10), // 1 KiB .. 256 MiB
		}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "roomcell_room_snapshot_failures_total",
			Help: "Room snapshots not written (the commands they followed are stored all the same), by reason: too_big, store.",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.Bytes, m.Failed} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("room: register snapshot metrics: %w", err)
		}
	}
	// Both reasons' series exist at zero from the start: a panel shows
	// no failures as 0, not as no data.
	m.Failed.WithLabelValues("too_big")
	m.Failed.WithLabelValues("store")
	return m, nil
}

func (m *SnapshotMetrics) observe(size int, err error) {
	if m == nil {
		return
	}
	if size > 0 {
		m.Bytes.Observe(float64(size))
	}
	switch {
	case err == nil:
	case errors.Is(err, errSnapshotTooBig):
		m.Failed.WithLabelValues("too_big").Inc()
	default:
		m.Failed.WithLabelValues("store").Inc()
	}
}

// snapshotIfDue writes the snapshot once SnapshotEvery commands passed
// since the last one written or tried.
func (g *grain) snapshotIfDue() {
	every := int64(g.deps.Config.SnapshotEvery)
	if every <= 0 || !g.loaded || g.unsure || g.state.Seq-g.snapSeq-int64(g.snapTried) < every {
		return
	}
	g.snapTried = uint32(min(g.state.Seq-g.snapSeq, math.MaxUint32))
	if err := g.saveSnapshot(); err != nil {
		g.log.Warn("room snapshot not written; the room replays more on its next activation", "seq", g.state.Seq, "error", err)
	}
}

// flushSnapshot stores the state if it moved past the stored snapshot
// (a room stopping). Failure only costs a longer replay on the next
// activation.
func (g *grain) flushSnapshot() {
	if !g.loaded || g.state.Seq <= g.snapSeq {
		return
	}
	if err := g.saveSnapshot(); err != nil {
		g.log.Warn("room snapshot on stop failed", "seq", g.state.Seq, "error", err)
	}
}

// saveSnapshot writes the state as the room's snapshot.
func (g *grain) saveSnapshot() error {
	b, err := g.marshalState() // front.go: the receipts encoded ahead
	if err != nil {
		return err
	}
	if max := g.deps.Config.SnapshotMaxBytes; max > 0 && len(b) > max {
		err = fmt.Errorf("%w: %d bytes, limit %d", errSnapshotTooBig, len(b), max)
	} else {
		snap := persistence.Snapshot{AppCode: g.state.AppCode, RoomID: g.state.RoomID, Seq: g.state.Seq, State: b, UpdatedAtMs: g.deps.Clock().UnixMilli()}
		err = g.storeCall(func(ctx context.Context) error { return g.deps.Store.SaveSnapshot(ctx, snap) })
	}
	g.deps.PublishMetrics.snapshot(len(b), err)
	if err != nil {
		return err
	}
	g.snapSeq, g.snapTried = g.state.Seq, 0
	return nil
}
