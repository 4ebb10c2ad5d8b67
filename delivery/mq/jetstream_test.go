package mq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
)

// EnvNATS overrides the NATS server of the tests.
const EnvNATS = "ROOMCELL_TEST_NATS"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// dial connects to the machine's NATS JetStream and returns a fresh topic
// (stream) name that is deleted at the end of the test.
func dial(t *testing.T) (*JetStream, string) {
	t.Helper()
	url := os.Getenv(EnvNATS)
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, err := DialJetStream(ctx, configs.MQConfig{Enabled: true, Kind: configs.MQKindNATS, Servers: []string{url}}, WithLogger(quiet))
	if err != nil {
		t.Fatalf("NATS at %s: %v", url, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	topic := "roomcell_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteTopic(ctx, topic); err != nil {
			t.Errorf("delete topic: %v", err)
		}
		js.Close()
	})
	return js, topic
}

// received collects handled messages.
type received struct {
	mu   sync.Mutex
	msgs []Message
}

func (r *received) add(m Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

func (r *received) all() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

func (r *received) deliveries(key string) []int {
	var out []int
	for _, m := range r.all() {
		if m.Key == key {
			out = append(out, m.Delivery)
		}
	}
	return out
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func subscribe(t *testing.T, js *JetStream, s Subscription) Consumer {
	t.Helper()
	c, err := js.Subscribe(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}

func publish(t *testing.T, p Publisher, topic, tag, key, data string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Publish(ctx, topic, tag, key, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// A group gets the messages of its tags with key, tag and data; a key
// published twice within the duplicate window is stored once.
func TestJetStreamPublishSubscribe(t *testing.T) {
	js, topic := dial(t)
	publish(t, js, topic, "RoomUserKicked", "k1", `{"n":1}`)
	publish(t, js, topic, "RoomUserJoined", "j1", `{"n":2}`)
	publish(t, js, topic, "RoomUserKicked", "k1", `{"n":1}`) // a relay retry
	publish(t, js, topic, "RoomUserKicked", "k2", `{"n":3}`)
	var got received
	subscribe(t, js, Subscription{Topic: topic, Group: "notice", Tags: []string{"RoomUserKicked"}, MaxRedeliver: 3,
		Handler: func(_ context.Context, m Message) error { got.add(m); return nil }})
	waitUntil(t, "two kicks", func() bool { return len(got.all()) >= 2 })
	time.Sleep(300 * time.Millisecond)
	msgs := got.all()
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want 2 (the join filtered out, the repeated k1 deduplicated): %+v", len(msgs), msgs)
	}
	if m := msgs[0]; m.Key != "k1" || m.Tag != "RoomUserKicked" || string(m.Data) != `{"n":1}` || m.Delivery != 1 || m.Topic != topic {
		t.Fatalf("message %+v", m)
	}
	// Another group gets everything again, independently.
	var other received
	subscribe(t, js, Subscription{Topic: topic, Group: "audit", Handler: func(_ context.Context, m Message) error { other.add(m); return nil }})
	waitUntil(t, "the second group", func() bool { return len(other.all()) == 3 })
	// Several tags are filtered client-side (older servers have no
	// multi-subject filter).
	var multi received
	subscribe(t, js, Subscription{Topic: topic, Group: "multi", Tags: []string{"RoomUserKicked", "RoomClosed"},
		Handler: func(_ context.Context, m Message) error { multi.add(m); return nil }})
	waitUntil(t, "the multi-tag group", func() bool { return len(multi.all()) >= 2 })
	time.Sleep(300 * time.Millisecond)
	if n := len(multi.all()); n != 2 {
		t.Fatalf("multi-tag group got %d messages, want the 2 kicks", n)
	}
}

// A failed message comes back (delivery 2, 3 ...) until it succeeds; a
// message that keeps failing is dropped after 1+MaxRedeliver deliveries;
// ErrDrop drops at once.
func TestJetStreamRedeliveryAndDrop(t *testing.T) {
	js, topic := dial(t)
	var got received
	subscribe(t, js, Subscription{Topic: topic, Group: "notice", MaxRedeliver: 2, RedeliverAfter: 50 * time.Millisecond,
		Handler: func(_ context.Context, m Message) error {
			got.add(m)
			switch {
			case m.Key == "flaky" && m.Delivery < 3:
				return errors.New("store down")
			case m.Key == "broken":
				return errors.New("store down for good")
			case m.Key == "garbage":
				return fmt.Errorf("%w: does not decode", ErrDrop)
			}
			return nil
		}})
	for _, k := range []string{"flaky", "broken", "garbage"} {
		publish(t, js, topic, "RoomUserKicked", k, "{}")
	}
	waitUntil(t, "flaky's third delivery", func() bool { return len(got.deliveries("flaky")) == 3 })
	waitUntil(t, "broken's last delivery", func() bool { return len(got.deliveries("broken")) == 3 })
	time.Sleep(500 * time.Millisecond) // more than the redelivery delays
	for key, want := range map[string][]int{"flaky": {1, 2, 3}, "broken": {1, 2, 3}, "garbage": {1}} {
		if got := got.deliveries(key); !slices.Equal(got, want) {
			t.Fatalf("%s delivered %v, want %v", key, got, want)
		}
	}
}

// Two members of one group share the messages: each is handled once.
func TestJetStreamGroupMembersShare(t *testing.T) {
	js, topic := dial(t)
	var a, b received
	subscribe(t, js, Subscription{Topic: topic, Group: "notice", Handler: func(_ context.Context, m Message) error { a.add(m); return nil }})
	subscribe(t, js, Subscription{Topic: topic, Group: "notice", Handler: func(_ context.Context, m Message) error { b.add(m); return nil }})
	const n = 200
	for i := range n {
		publish(t, js, topic, "RoomUserKicked", fmt.Sprint("k", i), "{}")
	}
	waitUntil(t, "every message", func() bool { return len(a.all())+len(b.all()) >= n })
	time.Sleep(200 * time.Millisecond)
	seen := map[string]int{}
	for _, m := range append(a.all(), b.all()...) {
		seen[m.Key]++
	}
	if len(seen) != n {
		t.Fatalf("%d distinct keys, want %d", len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("%s handled %d times", k, c)
		}
	}
}

// stubIM is the relay's IM publisher in the fanout tests.
type stubIM struct {
	mu   sync.Mutex
	envs []persistence.Envelope
	err  error
}

func (s *stubIM) PublishRoomEvent(_ context.Context, env persistence.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.envs = append(s.envs, env)
	return s.err
}

// stubQueueIM also has the relay's Enqueue.
type stubQueueIM struct{ stubIM }

func (s *stubQueueIM) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	ch := make(chan error, 1)
	ch <- s.PublishRoomEvent(ctx, env)
	return ch
}

type failingMQ struct{}

func (failingMQ) Publish(context.Context, string, string, string, []byte) error {
	return errors.New("mq: broker unreachable")
}

// The fanout sends every event to IM and to the topic (tag = type, key =
// event_id, data = the envelope JSON) and fails unless both did.
func TestRoomOutboxFanout(t *testing.T) {
	js, topic := dial(t)
	env := persistence.Envelope{EventID: "lalu:r1:5:0", EventType: "RoomUserKicked", AppCode: "lalu", RoomID: "r1", RoomSeq: 5,
		CommandID: "c5", CreatedAtMs: 1000, Payload: json.RawMessage(`{"target_user_id":"bob"}`)}
	ctx := context.Background()

	im := &stubQueueIM{}
	f := NewRoomOutboxFanout(im, js, topic)
	if err := <-f.Enqueue(ctx, env); err != nil {
		t.Fatal(err)
	}
	var got received
	subscribe(t, js, Subscription{Topic: topic, Group: "notice", Handler: func(_ context.Context, m Message) error { got.add(m); return nil }})
	waitUntil(t, "the fanned-out event", func() bool { return len(got.all()) == 1 })
	m := got.all()[0]
	want, _ := json.Marshal(env)
	if m.Key != env.EventID || m.Tag != env.EventType || string(m.Data) != string(want) {
		t.Fatalf("message %+v", m)
	}
	if len(im.envs) != 1 || im.envs[0].EventID != env.EventID {
		t.Fatalf("IM got %+v", im.envs)
	}

	// IM fails: the row must stay pending even though the topic has it.
	plain := &stubIM{err: errors.New("tencent im: 503")}
	if err := NewRoomOutboxFanout(plain, js, topic).PublishRoomEvent(ctx, env); err == nil || len(plain.envs) != 1 {
		t.Fatalf("IM failure: %v", err)
	}
	// The topic fails: likewise, though IM has it.
	ok := &stubIM{}
	if err := NewRoomOutboxFanout(ok, failingMQ{}, topic).PublishRoomEvent(ctx, env); err == nil || len(ok.envs) != 1 {
		t.Fatalf("MQ failure: %v", err)
	}
}
