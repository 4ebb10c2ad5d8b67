//go:build !race

// rocketmq-client-go's push consumer has data races of its own (its
// process queue's tree is read and written by different goroutines), so
// this file is built only without -race; `make test` runs it in a
// race-free pass (target rocketmq).

package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/mq/rocketmq"
	"github.com/hyapp/roomcell/delivery/mq/rocketmq/rocketmqtest"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// lostAcks is the real RocketMQ client with every 7th batch's answer lost
// after the broker stored it: the fanout hears that only the first half
// of the batch was stored (a timeout after a partial write, as far as it
// can tell) and sends the rest again. Those resent event ids are the only
// duplicates the topic may carry.
type lostAcks struct {
	*rocketmq.Client
	calls  atomic.Int64
	mu     sync.Mutex
	resent map[string]bool
}

func (l *lostAcks) PublishOrderedBatch(ctx context.Context, topic, orderKey string, msgs []mq.Outgoing) (int, error) {
	n, err := l.Client.PublishOrderedBatch(ctx, topic, orderKey, msgs)
	if err != nil || len(msgs) < 2 || l.calls.Add(1)%7 != 0 {
		return n, err
	}
	half := len(msgs) / 2
	l.mu.Lock()
	for _, m := range msgs[half:] {
		l.resent[m.Key] = true
	}
	l.mu.Unlock()
	return half, context.DeadlineExceeded
}

// Per-room order on the topic under load (the machine's broker): 100
// rooms append 40 joins each concurrently while the MQ fanout worker runs
// (kicked per append, small rounds so a room's rows span many batches),
// and one batch in seven loses its acknowledgement half-way. An ordered
// consumer group reads the topic: per room, the first delivery of each
// event_id comes in room_seq order 1..40 with no gap and nothing missing;
// a message seen twice is one the fanout had to send again (the contract:
// at least once, consumers drop the repeat by event_id). Every row ends
// MQ-published.
func TestRocketMQFanoutOrderPerRoomUnderLoad(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	shared := rocketmqtest.Shared()
	topic := shared.Topic(t, "roomcell_order_")
	c, err := rocketmq.Dial(ctx, shared.Config(), rocketmq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	pub := &lostAcks{Client: c, resent: map[string]bool{}}

	const rooms, perRoom = 100, 40
	type delivery struct {
		seq int64
		id  string
	}
	var mu sync.Mutex
	got := map[string][]delivery{} // room → deliveries in handling order
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	k, err := c.Subscribe(sctx, mq.Subscription{Topic: topic, Group: "roomcell-order-" + topic, Ordered: true, MaxRedeliver: 3,
		Handler: func(_ context.Context, m mq.Message) error {
			var env persistence.Envelope
			if err := json.Unmarshal(m.Data, &env); err != nil || env.EventID != m.Key {
				return fmt.Errorf("%w: message %q does not carry its envelope", mq.ErrDrop, m.Key)
			}
			mu.Lock()
			got[env.RoomID] = append(got[env.RoomID], delivery{env.RoomSeq, env.EventID})
			mu.Unlock()
			return nil
		}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = k.Stop(ctx)
	})

	s := memdb.New(memdb.WithOutboxMQ())
	t.Cleanup(func() { _ = s.Close() })
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	f, err := relay.StartMQ(sup, relay.MQDeps{Store: s, MQ: pub, Topic: topic, NodeID: "n1", Logger: quiet,
		Config: configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 20 * time.Millisecond, BatchSize: 150, PublishTimeout: 5 * time.Second,
			LeaseTTL: 10 * time.Second})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Stop(10 * time.Second) })

	var wg sync.WaitGroup
	for r := range rooms {
		wg.Go(func() {
			id := fmt.Sprintf("r%03d", r)
			for seq := int64(1); seq <= perRoom; seq++ {
				payload, _ := json.Marshal(room.RoomUserJoined{UserID: fmt.Sprint("u", seq), JoinedAtMs: 1})
				env := persistence.Envelope{EventID: room.EventID("order", id, seq, 0), EventType: room.TypeRoomUserJoined,
					AppCode: "order", RoomID: id, RoomSeq: seq, CommandID: fmt.Sprint(id, "-", seq), CreatedAtMs: time.Now().UnixMilli(), Payload: payload}
				err := s.Append(ctx, persistence.Append{Command: persistence.CommandRecord{AppCode: "order", RoomID: id, Seq: seq,
					CommandID: env.CommandID, CommandType: room.CmdJoinRoom, CreatedAtMs: env.CreatedAtMs, Events: []persistence.Envelope{env}}})
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				f.Kick()
				time.Sleep(time.Duration(r%5) * time.Millisecond)
			}
		})
	}
	wg.Wait()

	firsts := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, ds := range got {
			seen := map[string]bool{}
			for _, d := range ds {
				if !seen[d.id] {
					seen[d.id] = true
					n++
				}
			}
		}
		return n
	}
	deadline := time.Now().Add(2 * time.Minute)
	for firsts() < rooms*perRoom {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events reached the group", firsts(), rooms*perRoom)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // a late repeat or a stray message would show now
	for r := range rooms {
		for seq := int64(1); seq <= perRoom; seq++ {
			id := room.EventID("order", fmt.Sprintf("r%03d", r), seq, 0)
			if row, err := s.GetOutbox(ctx, id); err != nil || row.MQStatus != persistence.OutboxMQPublished {
				t.Fatalf("%s: %+v %v, want MQ-published", id, row, err)
			}
		}
	}

	mu.Lock()
	defer mu.Unlock()
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if len(got) != rooms {
		t.Fatalf("%d rooms on the topic, want %d", len(got), rooms)
	}
	dups := 0
	for roomID, ds := range got {
		seen := map[string]bool{}
		next := int64(1)
		for _, d := range ds {
			if seen[d.id] {
				if !pub.resent[d.id] {
					t.Fatalf("%s: %s (seq %d) delivered twice but the fanout never had to resend it", roomID, d.id, d.seq)
				}
				dups++
				continue
			}
			seen[d.id] = true
			if d.seq != next {
				t.Fatalf("%s: first delivery of seq %d where %d was due (deliveries %v)", roomID, d.seq, next, ds)
			}
			next++
		}
		if next != perRoom+1 {
			t.Fatalf("%s: %d events, want %d", roomID, next-1, perRoom)
		}
	}
	if pub.calls.Load() < 7 {
		t.Fatalf("only %d batches: the lost acknowledgements never happened", pub.calls.Load())
	}
	t.Logf("%d events in %d rooms in order; %d batches, %d resent after a lost acknowledgement, %d repeats delivered",
		rooms*perRoom, rooms, pub.calls.Load(), len(pub.resent), dups)
}
