package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/room"
)

// runStore shows the relay a store that marks runs
// (persistence.OutboxRunMarker), counts its run marks, and loses the
// store write of the failures named in lose (a database error mid-batch).
type runStore struct {
	persistence.Store
	lose map[string]bool
	runs atomic.Int64
}

func (s *runStore) MarkOutboxPublishedRuns(ctx context.Context, runs []persistence.OutboxRun, nowMs int64) error {
	s.runs.Add(1)
	return s.Store.(persistence.OutboxRunMarker).MarkOutboxPublishedRuns(ctx, runs, nowMs)
}

func (s *runStore) MarkOutboxFailed(ctx context.Context, id, lastError string, nowMs, nextRetryAtMs int64) error {
	if s.lose[id] {
		return errors.New("database error")
	}
	return s.Store.MarkOutboxFailed(ctx, id, lastError, nowMs, nextRetryAtMs)
}

// verdictSink is an Enqueuer answering each event with verdict's error
// (nil: sent), recording the events it reported sent.
type verdictSink struct {
	verdict func(env persistence.Envelope) error
	mu      sync.Mutex
	sent    map[string]bool
}

func (s *verdictSink) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	err := s.verdict(env)
	s.mu.Lock()
	if err == nil {
		s.sent[env.EventID] = true
	}
	s.mu.Unlock()
	done := make(chan error, 1)
	done <- err
	return done
}

func (s *verdictSink) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	return <-s.Enqueue(ctx, env)
}

// A claim's published rows are marked by runs, and no run covers a row
// that was not sent: rooms with a no-op event in the middle, a failure
// (its later rows given back), a parked row between sent ones, and a
// failure whose store write was lost followed by rows the publisher still
// reported sent (the lost row stays pending, claimed but unsent, between
// two runs). Each row ends published exactly when it was sent or is a
// no-op.
func TestRunMarksNeverCoverUnsentRows(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) persistence.Store
	}{{"memdb", newMemDB}, {"mariadb", newMariaDB}} {
		t.Run(c.name, func(t *testing.T) {
			const rooms, perRoom = 5, 30
			s := &runStore{Store: c.store(t), lose: map[string]bool{"rn4-4": true}}
			noop := map[string]bool{}
			var envs []persistence.Envelope
			for r := range rooms {
				for q := 1; q <= perRoom; q++ {
					id := fmt.Sprintf("rn%d-%d", r, q)
					var e persistence.Envelope
					if q == 3 {
						e = envelope(t, id, room.RoomHeatChanged{Delta: 1, Heat: int64(q)}, clockBase+int64(q*10+r))
						noop[id] = true
					} else {
						e = joined(t, id, clockBase+int64(q*10+r))
					}
					e.RoomID, e.RoomSeq = fmt.Sprint("rn", r), int64(q)
					envs = append(envs, e)
				}
			}
			insert(t, s.Store, envs...)
			sink := &verdictSink{sent: map[string]bool{}, verdict: func(env persistence.Envelope) error {
				switch env.EventID {
				case "rn1-6", "rn4-4":
					return errors.New("im timeout")
				case "rn2-5":
					return permanentErr{errors.New("message refused")}
				}
				return nil
			}}
			res, err := ProcessBatch(context.Background(), Deps{Store: s, Publisher: sink, NodeID: "n1",
				Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.BatchSize = 200 })})
			if err != nil {
				t.Fatal(err)
			}
			if res.Claimed != rooms*perRoom || s.runs.Load() == 0 {
				t.Fatalf("claimed %d rows, %d run marks: %+v", res.Claimed, s.runs.Load(), res)
			}
			for _, e := range envs {
				g := get(t, s.Store, e.EventID)
				switch want := sink.sent[e.EventID] || noop[e.EventID]; {
				case e.EventID == "rn2-5":
					if g.Status != persistence.OutboxParked {
						t.Fatalf("%s refused for good: %s", e.EventID, g.Status)
					}
				case want != (g.Status == persistence.OutboxPublished):
					t.Fatalf("%s is %s; sent or a no-op: %v", e.EventID, g.Status, want)
				}
			}
			if g := get(t, s.Store, "rn4-4"); g.Status != persistence.OutboxPending || g.RetryCount != 0 {
				t.Fatalf("the row whose failure was lost: %+v", g)
			}
			if g := get(t, s.Store, "rn1-6"); g.Status != persistence.OutboxPending || g.RetryCount != 1 {
				t.Fatalf("the failed row: %+v", g)
			}
			if !sink.sent["rn4-5"] || !sink.sent["rn2-6"] {
				t.Fatal("the sink did not report the rows after the failures sent: the case is not exercised")
			}
			// A few rows (a live room's given-back rows) go by id.
			marks := s.runs.Load()
			few := pendingJoins(t, s.Store, "few", 5)
			if res, err := ProcessBatch(context.Background(), Deps{Store: s, Publisher: sink, NodeID: "n1", Config: testConfig()}); err != nil || res.Published != 5 {
				t.Fatalf("a batch of 5: %+v, %v", res, err)
			}
			if s.runs.Load() != marks {
				t.Fatal("5 rows were marked by runs, not by id")
			}
			for _, id := range few {
				if g := get(t, s.Store, id); g.Status != persistence.OutboxPublished {
					t.Fatalf("%s after a small batch: %s", id, g.Status)
				}
			}
		})
	}
}
