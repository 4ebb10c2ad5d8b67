package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// topicSink is an in-memory ordered topic shared by several fanouts: a
// message is on the topic when its publish records it, after a short
// random delay (the network), so a fanout that holds a room's earlier
// rows can be overtaken by another sending the room's later ones. Every
// 7th batch loses its acknowledgement after the sink stored it all: the
// fanout hears only half was stored and sends the rest again, and those
// event ids are the only repeats the topic may carry.
type topicSink struct {
	mu     sync.Mutex
	got    map[string][]persistence.Envelope // room → messages in topic order
	resent map[string]bool
	calls  atomic.Int64
}

func (s *topicSink) store(data []byte) error {
	var env persistence.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	s.mu.Lock()
	s.got[env.RoomID] = append(s.got[env.RoomID], env)
	s.mu.Unlock()
	return nil
}

func (s *topicSink) Publish(_ context.Context, _, _, _ string, data []byte) error {
	time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
	return s.store(data)
}

func (s *topicSink) PublishOrderedBatch(_ context.Context, _, _ string, msgs []mq.Outgoing) (int, error) {
	time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
	for _, m := range msgs {
		if err := s.store(m.Data); err != nil {
			return 0, err
		}
	}
	if len(msgs) < 2 || s.calls.Add(1)%7 != 0 {
		return len(msgs), nil
	}
	half := len(msgs) / 2
	s.mu.Lock()
	for _, m := range msgs[half:] {
		s.resent[m.Key] = true
	}
	s.mu.Unlock()
	return half, context.DeadlineExceeded
}

// nodeSink is one node's client of the shared sink; it counts the
// node's requests.
type nodeSink struct {
	*topicSink
	requests atomic.Int64
}

func (n *nodeSink) Publish(ctx context.Context, topic, tag, key string, data []byte) error {
	n.requests.Add(1)
	return n.topicSink.Publish(ctx, topic, tag, key, data)
}

func (n *nodeSink) PublishOrderedBatch(ctx context.Context, topic, orderKey string, msgs []mq.Outgoing) (int, error) {
	n.requests.Add(1)
	return n.topicSink.PublishOrderedBatch(ctx, topic, orderKey, msgs)
}

// Two MQ fanouts (two nodes with the relay role) over one store, under
// load: 60 rooms append 30 joins each concurrently while both fanouts
// run, kicked on every append, with small rounds so a room's rows span
// many claims. Per room, the first delivery of each event on the topic
// comes in room_seq order 1..30, with no gap and nothing lost; a repeat is
// only an event the fanout had to resend; every row ends MQ-published.
// With claims by time, the second fanout took a room's later rows while
// the first still held its earlier ones and the topic got them first.
func TestMQTwoFanoutsKeepRoomOrder(t *testing.T) {
	for _, sc := range []struct {
		name string
		new  func(t *testing.T) persistence.Store
	}{
		{"memdb", func(t *testing.T) persistence.Store { return newMQStore(t) }},
		{"mariadb", func(t *testing.T) persistence.Store {
			cfg, _ := mysqltest.NewDatabase(t)
			s, err := mysql.Open(context.Background(), cfg, mysql.WithOutboxMQ(true),
				mysql.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	} {
		t.Run(sc.name, func(t *testing.T) { testTwoFanouts(t, sc.new(t)) })
	}
}

func testTwoFanouts(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	sink := &topicSink{got: map[string][]persistence.Envelope{}, resent: map[string]bool{}}
	const rooms, perRoom = 60, 30
	var (
		fanouts []*supervise.Poller[MQResult]
		clients []*nodeSink
	)
	for _, node := range []string{"n1", "n2"} {
		client := &nodeSink{topicSink: sink}
		clients = append(clients, client)
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
		t.Cleanup(sys.Shutdown)
		sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
		if err != nil {
			t.Fatal(err)
		}
		f, err := StartMQ(sup, MQDeps{Store: s, MQ: client, Topic: "t", NodeID: node, Logger: quiet,
			Config: configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 10 * time.Millisecond, BatchSize: 20, PublishTimeout: 5 * time.Second,
				LeaseTTL: 10 * time.Second})})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Stop(10 * time.Second) })
		fanouts = append(fanouts, f)
	}

	var wg sync.WaitGroup
	for r := range rooms {
		wg.Go(func() {
			id := fmt.Sprintf("r%03d", r)
			for seq := int64(1); seq <= perRoom; seq++ {
				payload, _ := json.Marshal(room.RoomUserJoined{UserID: fmt.Sprint("u", seq), JoinedAtMs: 1})
				env := persistence.Envelope{EventID: room.EventID("order", id, seq, 0), EventType: room.TypeRoomUserJoined,
					AppCode: "order", RoomID: id, RoomSeq: seq, CommandID: fmt.Sprint(id, "-", seq), CreatedAtMs: time.Now().UnixMilli(), Payload: payload}
				err := s.Append(ctx, persistence.Append{Command: persistence.CommandRecord{AppCode: "order", RoomID: id, Seq: seq,
					CommandID: env.CommandID, CommandType: room.CmdJoinRoom, Reply: []byte(`{}`), CreatedAtMs: env.CreatedAtMs,
					Events: []persistence.Envelope{env}}})
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				for _, f := range fanouts {
					f.Kick()
				}
				time.Sleep(time.Duration(r%3) * time.Millisecond)
			}
		})
	}
	wg.Wait()

	published := func() bool {
		st, err := s.OutboxStats(ctx)
		return err == nil && st.MQPending == 0
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !published() {
		if time.Now().After(deadline) {
			st, err := s.OutboxStats(ctx)
			t.Fatalf("not drained: %+v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for r := range rooms {
		for seq := int64(1); seq <= perRoom; seq++ {
			id := room.EventID("order", fmt.Sprintf("r%03d", r), seq, 0)
			if row, err := s.GetOutbox(ctx, id); err != nil || row.MQStatus != persistence.OutboxMQPublished {
				t.Fatalf("%s: %+v %v, want MQ-published", id, row, err)
			}
		}
	}

	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.got) != rooms {
		t.Fatalf("%d rooms on the topic, want %d", len(sink.got), rooms)
	}
	dups := 0
	for roomID, envs := range sink.got {
		seen := map[string]bool{}
		next := int64(1)
		for _, e := range envs {
			if seen[e.EventID] {
				if !sink.resent[e.EventID] {
					t.Fatalf("%s: %s (seq %d) delivered twice but no fanout had to resend it", roomID, e.EventID, e.RoomSeq)
				}
				dups++
				continue
			}
			seen[e.EventID] = true
			if e.RoomSeq != next {
				t.Fatalf("%s: first delivery of seq %d where %d was due", roomID, e.RoomSeq, next)
			}
			next++
		}
		if next != perRoom+1 {
			t.Fatalf("%s: %d events, want %d", roomID, next-1, perRoom)
		}
	}
	for i, c := range clients {
		if c.requests.Load() == 0 {
			t.Fatalf("fanout %d sent nothing: the test did not run two owners", i+1)
		}
	}
	if sink.calls.Load() < 7 {
		t.Fatalf("only %d batches: no acknowledgement was lost", sink.calls.Load())
	}
	t.Logf("%d events in %d rooms in order over 2 fanouts (requests %d + %d); %d batches, %d resent, %d repeats", rooms*perRoom, rooms,
		clients[0].requests.Load(), clients[1].requests.Load(), sink.calls.Load(), len(sink.resent), dups)
}
