package relay

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// claimWatch wraps a store and checks the pipeline's rule from outside: a
// claim never hands out a row of a room whose rows another claim still
// holds unsettled (not yet marked, failed, parked or released).
type claimWatch struct {
	persistence.Store
	mu        sync.Mutex
	held      map[string]heldRow        // event id -> its claim
	roomHeld  map[string]map[string]int // room -> owner -> unsettled rows
	overlaps  int                       // claims that started while another owner's rows were unsettled
	conflicts []string
}

type heldRow struct{ room, owner string }

func newClaimWatch(s persistence.Store) *claimWatch {
	return &claimWatch{Store: s, held: map[string]heldRow{}, roomHeld: map[string]map[string]int{}}
}

func (w *claimWatch) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	w.claiming(owner)
	rows, err := w.Store.ClaimPendingOutbox(ctx, owner, nowMs, leaseMs, limit)
	w.claimed(owner, rows)
	return rows, err
}

// claiming counts a claim that starts while another owner's rows are
// unsettled.
func (w *claimWatch) claiming(owner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.held {
		if h.owner != owner {
			w.overlaps++
			break
		}
	}
}

// claimed records rows owner claimed, and a conflict for each row of a
// room another owner still holds unsettled rows of.
func (w *claimWatch) claimed(owner string, rows []persistence.OutboxRow) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rows {
		room := r.Envelope.RoomID
		for o, n := range w.roomHeld[room] {
			if o != owner && n > 0 {
				w.conflicts = append(w.conflicts, fmt.Sprintf("%s claimed by %s while %s holds %d rows of %s", r.Envelope.EventID, owner, o, n, room))
			}
		}
		if w.roomHeld[room] == nil {
			w.roomHeld[room] = map[string]int{}
		}
		w.roomHeld[room][owner]++
		w.held[r.Envelope.EventID] = heldRow{room: room, owner: owner}
	}
}

// settle forgets ids before the store write: a claim racing the write
// then finds the room still held in the store, never free in the watch
// but held in the store.
func (w *claimWatch) settle(ids ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if h, ok := w.held[id]; ok {
			w.roomHeld[h.room][h.owner]--
			delete(w.held, id)
		}
	}
}

func (w *claimWatch) MarkOutboxPublished(ctx context.Context, id string, nowMs int64) error {
	w.settle(id)
	return w.Store.MarkOutboxPublished(ctx, id, nowMs)
}

func (w *claimWatch) MarkOutboxPublishedBatch(ctx context.Context, ids []string, nowMs int64) error {
	w.settle(ids...)
	return w.Store.MarkOutboxPublishedBatch(ctx, ids, nowMs)
}

func (w *claimWatch) MarkOutboxFailed(ctx context.Context, id, lastError string, nowMs, nextRetryAtMs int64) error {
	w.settle(id)
	return w.Store.MarkOutboxFailed(ctx, id, lastError, nowMs, nextRetryAtMs)
}

func (w *claimWatch) ParkOutbox(ctx context.Context, id, lastError string, nowMs int64) error {
	w.settle(id)
	return w.Store.ParkOutbox(ctx, id, lastError, nowMs)
}

func (w *claimWatch) ReleaseOutboxBatch(ctx context.Context, ids []string) error {
	w.settle(ids...)
	return w.Store.ReleaseOutboxBatch(ctx, ids)
}

// slowSink is an Enqueuer whose results come a little later, each on its
// own: the relay's settle of a claim takes long enough for the next claim
// to run beside it. It records every send and each room's room_seq order.
type slowSink struct {
	mu       sync.Mutex
	sends    map[string]int
	last     map[string]int64
	reorders []string
}

func (s *slowSink) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	s.mu.Lock()
	s.sends[env.EventID]++
	if prev, ok := s.last[env.RoomID]; ok && s.sends[env.EventID] == 1 && prev > env.RoomSeq {
		s.reorders = append(s.reorders, fmt.Sprintf("%s (seq %d) after seq %d", env.EventID, env.RoomSeq, prev))
	}
	s.last[env.RoomID] = env.RoomSeq
	s.mu.Unlock()
	done := make(chan error, 1)
	time.AfterFunc(2*time.Millisecond, func() { done <- nil })
	return done
}

func (s *slowSink) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	return <-s.Enqueue(ctx, env)
}

func (s *slowSink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sends)
}

// checkDrain fails t unless no row was claimed while another claim held
// its room, and sink got want distinct events, each once and in its
// room's order. Callers hold w.mu.
func (w *claimWatch) checkDrain(t *testing.T, sink *slowSink, want int) {
	t.Helper()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(w.conflicts) > 0 {
		t.Fatalf("%d rows claimed while another claim held their room, first: %s", len(w.conflicts), w.conflicts[0])
	}
	if len(sink.reorders) > 0 {
		t.Fatalf("%d events out of room order, first: %s", len(sink.reorders), sink.reorders[0])
	}
	if len(sink.sends) != want {
		t.Fatalf("%d distinct events sent, want %d", len(sink.sends), want)
	}
	for id, n := range sink.sends {
		if n != 1 {
			t.Fatalf("%s sent %d times", id, n)
		}
	}
}

// A backlog in many rooms drains with the next claim taken while the one
// before is still settling, and still: no room's rows in two unsettled
// claims at once, every event sent once, each room's events in room_seq
// order.
func TestPipelinedClaimsNeverShareARoom(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) persistence.Store
	}{{"memdb", newMemDB}, {"mariadb", newMariaDB}} {
		t.Run(c.name, func(t *testing.T) {
			w := newClaimWatch(c.store(t))
			const rooms, perRoom = 150, 4
			var envs []persistence.Envelope
			for j := range perRoom {
				for r := range rooms {
					e := joined(t, fmt.Sprintf("p%03d-%d", r, j), clockBase+int64(j*1000+r))
					e.RoomID, e.RoomSeq = fmt.Sprint("pr", r), int64(j+1)
					envs = append(envs, e)
				}
			}
			insert(t, w, envs...)
			sink := &slowSink{sends: map[string]int{}, last: map[string]int64{}}
			startRelay(t, newSystem(t), Deps{Store: w, Publisher: sink, NodeID: "n1", Config: testConfig(func(c *configs.OutboxWorkerConfig) {
				c.BatchSize, c.HotRoomBatch, c.PollInterval = 20, 20, time.Hour
			})})
			eventually(t, "backlog drained", func() bool {
				st, err := w.OutboxStats(context.Background())
				return err == nil && st.Pending == 0
			})
			w.mu.Lock()
			defer w.mu.Unlock()
			w.checkDrain(t, sink, rooms*perRoom)
			if w.overlaps == 0 {
				t.Fatal("no claim ran while an earlier claim was settling: the drain is not pipelined")
			}
		})
	}
}
