package relay

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// resumeWatch is claimWatch for a store whose claims resume
// (persistence.OutboxClaimResumer): it counts the claims that resumed
// and fails every failEvery-th of them, as a database error would.
type resumeWatch struct {
	*claimWatch
	resumed   atomic.Int64
	failEvery int64
	failed    atomic.Int64
}

var errClaimInjected = errors.New("injected claim failure")

func (w *resumeWatch) ClaimPendingOutboxFrom(ctx context.Context, owner string, nowMs, leaseMs int64, limit int,
	from persistence.OutboxScanMark) ([]persistence.OutboxRow, persistence.OutboxScanMark, error) {
	if from.Set {
		if n := w.resumed.Add(1); w.failEvery > 0 && n%w.failEvery == 0 {
			w.failed.Add(1)
			return nil, from, errClaimInjected
		}
	}
	w.claiming(owner)
	rows, at, err := w.Store.(persistence.OutboxClaimResumer).ClaimPendingOutboxFrom(ctx, owner, nowMs, leaseMs, limit, from)
	w.claimed(owner, rows)
	return rows, at, err
}

// Claims that resume where the claim before them stopped, from two relays
// at once, with rooms another owner holds until the middle of the drain
// and every fourth resumed claim failing: no room's rows in two unsettled
// claims at once, every event sent once and in its room's order, and the
// rooms the outsider held (passed over by resumed claims while held) are
// sent once it gives them back.
func TestResumedClaimsNeverShareOrStarveARoom(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) persistence.Store
	}{{"memdb", newMemDB}, {"mariadb", newMariaDB}} {
		t.Run(c.name, func(t *testing.T) {
			w := &resumeWatch{claimWatch: newClaimWatch(c.store(t)), failEvery: 4}
			const rooms, perRoom, outside = 150, 4, 10
			var envs []persistence.Envelope
			for j := range perRoom {
				for r := range rooms {
					e := joined(t, fmt.Sprintf("q%03d-%d", r, j), clockBase+int64(j*1000+r))
					e.RoomID, e.RoomSeq = fmt.Sprint("qr", r), int64(j+1)
					envs = append(envs, e)
				}
			}
			insert(t, w.Store, envs...)
			// An outsider holds the oldest rooms (every fifth of the
			// first 50), so the relays' walks pass over them.
			var held []string
			for r := 0; r < 5*outside; r += 5 {
				rows, err := w.Store.ClaimRoomOutbox(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: fmt.Sprint("qr", r)},
					"outsider", time.Now().UnixMilli(), time.Hour.Milliseconds(), perRoom)
				if err != nil || len(rows) != perRoom {
					t.Fatalf("outsider claim of qr%d: %d rows, %v", r, len(rows), err)
				}
				for _, row := range rows {
					held = append(held, row.Envelope.EventID)
				}
			}
			sink := &slowSink{sends: map[string]int{}, last: map[string]int64{}}
			cfg := testConfig(func(c *configs.OutboxWorkerConfig) {
				c.BatchSize, c.HotRoomBatch, c.PollInterval = 20, 20, 20*time.Millisecond
			})
			sys := newSystem(t)
			startRelay(t, sys, Deps{Store: w, Publisher: sink, NodeID: "n1", Config: cfg})
			startRelay(t, sys, Deps{Store: w, Publisher: sink, NodeID: "n2", Config: cfg})
			eventually(t, "half the free rooms sent", func() bool { return sink.total() >= (rooms-outside)*perRoom/2 })
			if err := w.Store.ReleaseOutboxBatch(context.Background(), held); err != nil {
				t.Fatal(err)
			}
			eventually(t, "backlog drained", func() bool {
				st, err := w.OutboxStats(context.Background())
				return err == nil && st.Pending == 0
			})
			w.mu.Lock()
			defer w.mu.Unlock()
			w.checkDrain(t, sink, rooms*perRoom)
			if w.resumed.Load() == 0 || w.failed.Load() == 0 {
				t.Fatalf("%d claims resumed, %d failed: the resumed path was not exercised", w.resumed.Load(), w.failed.Load())
			}
		})
	}
}
