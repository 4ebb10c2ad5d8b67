package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// batchMQ is a queue that takes batches: each call records its order key
// and keys; stored decides how many of a call's messages it stores and
// with which error.
type batchMQ struct {
	*fakeMQ
	mu     sync.Mutex
	calls  [][]string
	keys   []string
	stored func(keys []string) (int, error)
}

func (b *batchMQ) PublishOrderedBatch(_ context.Context, topic, orderKey string, msgs []mq.Outgoing) (int, error) {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = m.Key
	}
	b.mu.Lock()
	b.calls = append(b.calls, keys)
	b.keys = append(b.keys, orderKey)
	b.mu.Unlock()
	n, err := len(msgs), error(nil)
	if b.stored != nil {
		n, err = b.stored(keys)
	}
	for _, m := range msgs[:n] {
		b.fakeMQ.mu.Lock()
		b.fakeMQ.keys[m.Key]++
		b.fakeMQ.tags[m.Key], b.fakeMQ.data[m.Key] = m.Tag, m.Data
		b.fakeMQ.mu.Unlock()
	}
	return n, err
}

// roomRows inserts n joins of one room, seq 1..n.
func roomRows(t *testing.T, s persistence.Store, roomID string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		e := joined(t, fmt.Sprintf("%s-%d", roomID, i+1), clockBase+int64(len(roomID)*100+i))
		e.RoomID, e.RoomSeq = roomID, int64(i+1)
		insert(t, s, e)
		ids = append(ids, e.EventID)
	}
	return ids
}

// With a queue that takes batches, a round sends each room's rows in one
// request, in room_seq order, on the room's order key; rows that never go
// to the topic are marked without a send and a corrupt one is parked,
// neither holding its room's batch back.
func TestMQBatchSendsARoomInOneRequest(t *testing.T) {
	s := newMQStore(t)
	a := roomRows(t, s, "a", 4)
	b := roomRows(t, s, "b", 3)
	heat := envelope(t, "a-heat", room.RoomHeatChanged{Heat: 5}, clockBase+50)
	heat.RoomID, heat.RoomSeq = "a", 5
	bad := joined(t, "a-bad", clockBase+51)
	bad.RoomID, bad.RoomSeq = "a", 6
	bad.Payload = json.RawMessage(`{"user_id":`)
	insert(t, s, heat, bad)
	a5 := joined(t, "a-7", clockBase+52)
	a5.RoomID, a5.RoomSeq = "a", 7
	insert(t, s, a5)
	q := &batchMQ{fakeMQ: newFakeMQ(nil)}
	res, err := ProcessMQBatch(context.Background(), MQDeps{Store: s, MQ: q, Topic: "t", Config: testConfig()}, "mq-1")
	if err != nil {
		t.Fatal(err)
	}
	if res != (MQResult{Claimed: 10, Published: 8, NoOp: 1, Parked: 1}) {
		t.Fatalf("result %+v", res)
	}
	if len(q.calls) != 2 {
		t.Fatalf("%d requests %v, want one per room", len(q.calls), q.calls)
	}
	want := map[string][]string{"app/a": append(slices.Clone(a), "a-7"), "app/b": b}
	for i, keys := range q.calls {
		if !slices.Equal(keys, want[q.keys[i]]) {
			t.Fatalf("order key %s got %v, want %v", q.keys[i], keys, want[q.keys[i]])
		}
	}
	for _, id := range append(append(a, b...), "a-7", "a-heat") {
		if row := get(t, s, id); row.MQStatus != persistence.OutboxMQPublished {
			t.Fatalf("%s: %+v", id, row)
		}
	}
	if q.count("a-heat") != 0 || get(t, s, "a-bad").MQStatus != persistence.OutboxMQParked {
		t.Fatal("the heat event was sent or the corrupt one not parked")
	}
}

// The queue stores the first two of a room's four rows and then fails:
// those two are marked, the other two are released without their lease
// (not published out of order, not held for the lease) and the next
// round sends exactly them, in order.
func TestMQBatchPartlyStoredReleasesTheRest(t *testing.T) {
	s := newMQStore(t)
	ids := roomRows(t, s, "a", 4)
	fail := true
	q := &batchMQ{fakeMQ: newFakeMQ(nil), stored: func(keys []string) (int, error) {
		if fail {
			return 2, context.DeadlineExceeded
		}
		return len(keys), nil
	}}
	deps := MQDeps{Store: s, MQ: q, Topic: "t", Config: testConfig()}
	res, err := ProcessMQBatch(context.Background(), deps, "mq-1")
	if err != nil || res.Published != 2 || res.Failed != 1 {
		t.Fatalf("first round %+v %v", res, err)
	}
	for i, id := range ids {
		row := get(t, s, id)
		if i < 2 && row.MQStatus != persistence.OutboxMQPublished {
			t.Fatalf("%s stored but %+v", id, row)
		}
		if i >= 2 && (row.MQStatus != persistence.OutboxMQPending || row.MQLockUntilMs != 0) {
			t.Fatalf("%s not stored but %+v", id, row)
		}
	}
	fail = false
	res, err = ProcessMQBatch(context.Background(), deps, "mq-2")
	if err != nil || res.Published != 2 {
		t.Fatalf("second round %+v %v", res, err)
	}
	if last := q.calls[len(q.calls)-1]; !slices.Equal(last, ids[2:]) {
		t.Fatalf("second round sent %v, want %v", last, ids[2:])
	}
	for _, id := range ids {
		if q.count(id) != 1 {
			t.Fatalf("%s stored %d times", id, q.count(id))
		}
	}
}

// A batch the queue refuses as it is (a permanent error at its second
// row) goes row by row from there: only the refused row is parked, the
// rows after it are published after it, in order.
func TestMQBatchRefusedGoesRowByRow(t *testing.T) {
	s := newMQStore(t)
	ids := roomRows(t, s, "a", 4)
	tooBig := permanentErr{errors.New("message body size exceeds the maximum")}
	var single []string
	base := newFakeMQ(func(key string) error {
		single = append(single, key)
		if key == ids[1] {
			return tooBig
		}
		return nil
	})
	q := &batchMQ{fakeMQ: base, stored: func(keys []string) (int, error) { return 1, tooBig }}
	res, err := ProcessMQBatch(context.Background(), MQDeps{Store: s, MQ: q, Topic: "t", Config: testConfig()}, "mq-1")
	if err != nil || res != (MQResult{Claimed: 4, Published: 3, Parked: 1}) {
		t.Fatalf("result %+v %v", res, err)
	}
	if !slices.Equal(single, ids[1:]) {
		t.Fatalf("row by row sent %v, want %v", single, ids[1:])
	}
	for i, id := range ids {
		want := persistence.OutboxMQPublished
		if i == 1 {
			want = persistence.OutboxMQParked
		}
		if row := get(t, s, id); row.MQStatus != want || q.count(id) != map[bool]int{true: 0, false: 1}[i == 1] {
			t.Fatalf("%s: %+v, stored %d", id, row, q.count(id))
		}
	}
}

type permanentErr struct{ error }

func (permanentErr) Permanent() bool { return true }

// A room whose rows share one millisecond (seq 1..12: event ids sort
// "…:10:0" before "…:2:0") drained by claims of 5: the store claims by
// (created_at_ms, event_id), so a claim cut within that millisecond holds
// seq 10 and 11 but not 2; the fanout gives such a cut back and claims
// wider, and the queue gets 1..12 in order. Another room's rows, a
// millisecond apart, drained in claims of 3 that cut between
// milliseconds, arrive in order too, with the last millisecond of each
// full claim held back for the next round.
func TestMQClaimCutKeepsRoomOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batch   int
		spacing int64
	}{{"one millisecond", 5, 0}, {"a millisecond apart", 3, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newMQStore(t)
			var want []string
			for i := range 12 {
				e := joined(t, room.EventID("app", "hot", int64(i+1), 0), clockBase+int64(i)*tc.spacing)
				e.RoomID, e.RoomSeq = "hot", int64(i+1)
				insert(t, s, e)
				want = append(want, e.EventID)
			}
			q := &batchMQ{fakeMQ: newFakeMQ(nil)}
			deps := MQDeps{Store: s, MQ: q, Topic: "t", Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.BatchSize = tc.batch })}
			for round := 0; ; round++ {
				res, err := ProcessMQBatch(context.Background(), deps, "mq-1")
				if err != nil {
					t.Fatal(err)
				}
				if res.Claimed == 0 {
					break
				}
				if round > 20 {
					t.Fatalf("not drained after %d rounds: %+v", round, res)
				}
			}
			var sent []string
			for _, c := range q.calls {
				sent = append(sent, c...)
			}
			if !slices.Equal(sent, want) {
				t.Fatalf("the queue got %v, want %v", sent, want)
			}
		})
	}
}

// releaseFails is a store whose MQ releases fail while fail is set.
type releaseFails struct {
	*memdb.Store
	fail bool
}

func (s *releaseFails) ReleaseOutboxMQ(ctx context.Context, ids []string) error {
	if s.fail {
		return errors.New("store down")
	}
	return s.Store.ReleaseOutboxMQ(ctx, ids)
}

// A room's batch fails and its release fails too: its rows keep their
// lease. Until that lease runs out, the room's next row (committed
// meanwhile) does not go ahead of them, while another room goes on; after
// it, the room's three rows go in order.
func TestMQFailedReleaseHoldsTheRoom(t *testing.T) {
	mem := newMQStore(t)
	s := &releaseFails{Store: mem}
	a := roomRows(t, mem, "a", 2)
	now := time.UnixMilli(clockBase + 1000)
	failA := true
	q := &batchMQ{fakeMQ: newFakeMQ(nil), stored: func(keys []string) (int, error) {
		if failA && strings.HasPrefix(keys[0], "a-") {
			return 0, context.DeadlineExceeded
		}
		return len(keys), nil
	}}
	d, err := MQDeps{Store: s, MQ: q, Topic: "t", Config: testConfig(), Clock: func() time.Time { return now }}.checked()
	if err != nil {
		t.Fatal(err)
	}
	hold := newMQHold()
	s.fail = true
	if res, err := processMQBatch(context.Background(), d, "mq-1", hold); err != nil || res.Failed != 1 {
		t.Fatalf("first round %+v %v", res, err)
	}
	s.fail, failA = false, false
	e := joined(t, "a-3", clockBase+500)
	e.RoomID, e.RoomSeq = "a", 3
	insert(t, mem, e)
	b := roomRows(t, mem, "b", 1)
	res, err := processMQBatch(context.Background(), d, "mq-1", hold)
	// The store does not hand out a room with leased rows (and the hold
	// would give a-3 back if it did): only b goes.
	if err != nil || res.Published != 1 {
		t.Fatalf("second round %+v %v: want b published and a-3 not sent", res, err)
	}
	if q.count("a-3") != 0 || q.count(b[0]) != 1 {
		t.Fatalf("a-3 sent %d times, b %d: a's later row went ahead of its leased ones", q.count("a-3"), q.count(b[0]))
	}
	now = now.Add(d.Config.LeaseTTL + time.Millisecond)
	if res, err := processMQBatch(context.Background(), d, "mq-1", hold); err != nil || res.Published != 3 {
		t.Fatalf("third round %+v %v", res, err)
	}
	if last := q.calls[len(q.calls)-1]; !slices.Equal(last, append(slices.Clone(a), "a-3")) {
		t.Fatalf("after the lease the queue got %v, want %v then a-3", last, a)
	}
}

// markFails is a store whose MQ-published marks fail while fail is set,
// as a mark does that waits past innodb_lock_wait_timeout behind the IM
// relay's writes to the same rows.
type markFails struct {
	*memdb.Store
	fail  bool
	marks int
}

func (s *markFails) MarkOutboxMQPublished(ctx context.Context, ids []string, nowMs int64) error {
	s.marks++
	if s.fail {
		return errors.New("lock wait timeout")
	}
	return s.Store.MarkOutboxMQPublished(ctx, ids, nowMs)
}

// The broker stored a round's rows but their mark failed: the rows keep
// their lease, and the store hands out no room with leased rows. The next
// round marks them again first, so their rooms' later rows go on at once,
// long before the lease runs out, and nothing is sent twice; while the
// store still refuses, the round claims nothing (nothing is sent that
// could not be marked).
func TestMQFailedMarkDoesNotHoldTheRoomsForTheLease(t *testing.T) {
	mem := newMQStore(t)
	s := &markFails{Store: mem}
	a, b := roomRows(t, mem, "a", 2), roomRows(t, mem, "b", 2)
	now := time.UnixMilli(clockBase + 1000)
	q := newFakeMQ(nil)
	d, err := MQDeps{Store: s, MQ: q, Topic: "t", Config: testConfig(func(c *configs.OutboxWorkerConfig) { c.LeaseTTL = time.Hour }),
		Clock: func() time.Time { return now }}.checked()
	if err != nil {
		t.Fatal(err)
	}
	hold := newMQHold()
	s.fail = true
	if res, err := processMQBatch(context.Background(), d, "mq-1", hold); err != nil || res.StoreErrors != 4 {
		t.Fatalf("first round %+v %v: want 4 rows sent and their mark failed", res, err)
	}
	a3 := joined(t, "a-3", clockBase+500)
	a3.RoomID, a3.RoomSeq = "a", 3
	insert(t, mem, a3)
	// The store still refuses: the round only tries the marks again.
	marks := s.marks
	if res, err := processMQBatch(context.Background(), d, "mq-1", hold); err != nil || res.StoreErrors != 4 || res.Claimed != 0 || s.marks != marks+1 {
		t.Fatalf("round while the store refuses %+v %v (%d marks): want only the marks tried again", res, err, s.marks-marks)
	}
	s.fail = false
	now = now.Add(d.Config.PollInterval) // far inside the hour-long lease
	res, err := processMQBatch(context.Background(), d, "mq-1", hold)
	if err != nil || res.Published != 1 || q.count("a-3") != 1 {
		t.Fatalf("round after the store came back %+v %v, a-3 sent %d times: the failed mark held room a for its lease", res, err, q.count("a-3"))
	}
	for _, id := range append(append(a, b...), "a-3") {
		if row := get(t, mem, id); row.MQStatus != persistence.OutboxMQPublished || row.MQLockUntilMs != 0 || q.count(id) != 1 {
			t.Fatalf("%s: row %+v sent %d times, want MQ-published once without a lease", id, row, q.count(id))
		}
	}
}
