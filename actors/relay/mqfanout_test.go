package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/supervise/supervisetest"
	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// fakeMQ records publishes by key; fn decides each call's outcome.
type fakeMQ struct {
	mu   sync.Mutex
	keys map[string]int
	tags map[string]string
	data map[string][]byte
	fn   func(key string) error
}

func newFakeMQ(fn func(key string) error) *fakeMQ {
	return &fakeMQ{keys: map[string]int{}, tags: map[string]string{}, data: map[string][]byte{}, fn: fn}
}

func (m *fakeMQ) Publish(_ context.Context, topic, tag, key string, data []byte) error {
	if m.fn != nil {
		if err := m.fn(key); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[key]++
	m.tags[key], m.data[key] = tag, data
	return nil
}

func (m *fakeMQ) count(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys[key]
}

func newMQStore(t *testing.T) *memdb.Store {
	s := memdb.New(memdb.WithOutboxMQ())
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// One fanout batch: IM events and RoomCreated go to the topic with tag =
// type, key = event_id and the envelope JSON; events that never reach IM
// are marked without a send; a corrupt envelope is parked for MQ only; the
// IM status of every row is untouched.
func TestMQBatchPublishesAndMarks(t *testing.T) {
	s := newMQStore(t)
	ids := pendingJoins(t, s, "ev", 3)
	heat := envelope(t, "heat-1", room.RoomHeatChanged{Heat: 5}, clockBase+10)
	bad := joined(t, "bad-1", clockBase+11)
	bad.Payload = json.RawMessage(`{"user_id":`)
	insert(t, s, heat)
	// A corrupt envelope gets into the table only past the grain's
	// checks: write it as its own command.
	insert(t, s, bad)
	mq := newFakeMQ(nil)
	res, err := ProcessMQBatch(context.Background(), MQDeps{Store: s, MQ: mq, Topic: "t", Config: testConfig()}, "mq-1")
	if err != nil {
		t.Fatal(err)
	}
	if res != (MQResult{Claimed: 5, Published: 3, NoOp: 1, Parked: 1}) {
		t.Fatalf("result %+v", res)
	}
	for _, id := range ids {
		row := get(t, s, id)
		if mq.count(id) != 1 || mq.tags[id] != room.TypeRoomUserJoined || row.MQStatus != persistence.OutboxMQPublished || row.Status != persistence.OutboxPending {
			t.Fatalf("%s: %d publishes, tag %q, row %+v", id, mq.count(id), mq.tags[id], row)
		}
		var env persistence.Envelope
		if err := json.Unmarshal(mq.data[id], &env); err != nil || env.EventID != id {
			t.Fatalf("%s: data %s is not its envelope: %v", id, mq.data[id], err)
		}
	}
	if row := get(t, s, "heat-1"); mq.count("heat-1") != 0 || row.MQStatus != persistence.OutboxMQPublished {
		t.Fatalf("non-IM event: %d publishes, row %+v", mq.count("heat-1"), row)
	}
	if row := get(t, s, "bad-1"); row.MQStatus != persistence.OutboxMQParked || row.Status != persistence.OutboxPending {
		t.Fatalf("corrupt envelope: row %+v, want MQ parked and IM untouched", row)
	}
}

// A failing publish ends its room's turn (later rows released, not sent
// ahead of it) and leaves the rows MQ-pending for the next round.
func TestMQBatchFailureHoldsItsRoom(t *testing.T) {
	s := newMQStore(t)
	a1, a2 := joined(t, "a-1", clockBase), joined(t, "a-2", clockBase+1)
	a2.RoomID, a2.RoomSeq = a1.RoomID, 2
	insert(t, s, a1, a2, joined(t, "b-1", clockBase+2))
	var fail atomic.Bool
	fail.Store(true)
	mq := newFakeMQ(func(key string) error {
		if key == "a-1" && fail.Load() {
			return context.DeadlineExceeded
		}
		return nil
	})
	deps := MQDeps{Store: s, MQ: mq, Topic: "t", Config: testConfig()}
	res, err := ProcessMQBatch(context.Background(), deps, "mq-1")
	if err != nil || res.Failed != 1 || res.Published != 1 {
		t.Fatalf("first round %+v %v", res, err)
	}
	if mq.count("a-2") != 0 || get(t, s, "a-2").MQStatus != persistence.OutboxMQPending || get(t, s, "a-1").MQLockUntilMs != 0 {
		t.Fatal("the room's later row went ahead of its failed one, or the failed row kept its lease")
	}
	fail.Store(false)
	res, err = ProcessMQBatch(context.Background(), deps, "mq-2")
	if err != nil || res.Published != 2 || mq.count("a-1") != 1 || mq.count("a-2") != 1 || mq.count("b-1") != 1 {
		t.Fatalf("second round %+v %v", res, err)
	}
}

// For the MQ fanout worker: a publish that panics 100
// times, then recovers. Restarted every time with backoff, counted, shown
// down while it waits; afterwards every row reaches the topic.
func TestMQFanoutSurvivesRepeatedPanics(t *testing.T) {
	s := newMQStore(t)
	// One room: its turn stops at its first panic, so each round panics
	// once and 100 panics are 100 restarts.
	var ids []string
	for i := range 30 {
		e := joined(t, fmt.Sprint("ev-", i), clockBase+int64(i))
		e.RoomID, e.RoomSeq = "hot", int64(i+1)
		insert(t, s, e)
		ids = append(ids, e.EventID)
	}
	const panics = 100
	var calls atomic.Int64
	mq := newFakeMQ(func(string) error {
		if calls.Add(1) <= panics {
			panic("mq publisher bug")
		}
		return nil
	})
	sup, reg := supervisetest.NewSupervisor(t, newSystem(t))
	stopWatch := supervisetest.WatchDown(sup.Health(), MQWorkerName)
	f, err := StartMQ(sup, MQDeps{Store: s, MQ: mq, Topic: "t", NodeID: "n1", Config: testConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Stop(5 * time.Second) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := s.OutboxStats(context.Background())
		if err == nil && st.MQPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not fanned out after the panics: %+v %v (calls %d)", st, err, calls.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sawDown := stopWatch()
	for _, id := range ids {
		if mq.count(id) != 1 {
			t.Fatalf("%s published %d times, want 1", id, mq.count(id))
		}
	}
	supervisetest.CheckRecovered(t, sup, reg, f, MQWorkerName, panics, sawDown)
}

type queueingPublisher struct{ *fakePublisher }

func (q queueingPublisher) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	ch := make(chan error, 1)
	ch <- q.PublishRoomEvent(ctx, env)
	return ch
}

// WithMQKick kicks before every hand-over, whatever IM answers, and keeps
// an Enqueuer an Enqueuer (the room's queued, in-order publishing).
func TestWithMQKick(t *testing.T) {
	var kicks atomic.Int64
	kick := func() { kicks.Add(1) }
	failing := newPublisher(func(context.Context, persistence.Envelope, int) error { return context.DeadlineExceeded })
	plain := WithMQKick(failing, kick)
	if _, ok := plain.(delivery.Enqueuer); ok {
		t.Fatal("a plain publisher became an Enqueuer")
	}
	if err := plain.PublishRoomEvent(context.Background(), joined(t, "a", clockBase)); err == nil || kicks.Load() != 1 {
		t.Fatalf("plain: err %v, %d kicks; want IM's error and one kick", err, kicks.Load())
	}
	q, ok := WithMQKick(queueingPublisher{newPublisher(nil)}, kick).(delivery.Enqueuer)
	if !ok {
		t.Fatal("an Enqueuer lost Enqueue")
	}
	if err := <-q.Enqueue(context.Background(), joined(t, "b", clockBase)); err != nil || kicks.Load() != 2 {
		t.Fatalf("enqueue: err %v, %d kicks", err, kicks.Load())
	}
}
