package mq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// A message larger than the server accepts can never be published as it
// is: its error says Permanent (the relay's MQ fanout parks such a row for
// the MQ channel only); an unreachable broker is not permanent.
func TestPublishTooLargeIsPermanent(t *testing.T) {
	js, topic := dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	big := make([]byte, js.nc.MaxPayload()+1)
	err := js.Publish(ctx, topic, "RoomUserKicked", "big", big)
	var p interface{ Permanent() bool }
	if err == nil || !errors.As(err, &p) || !p.Permanent() {
		t.Fatalf("publish over max payload: %v, want a permanent error", err)
	}
	js2, err := DialJetStream(ctx, configs.MQConfig{Enabled: true, Kind: configs.MQKindNATS, Servers: []string{js.nc.ConnectedUrl()}}, WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	js2.Close()
	err = js2.Publish(ctx, topic, "RoomUserKicked", "k", []byte("x"))
	if err == nil || (errors.As(err, &p) && p.Permanent()) {
		t.Fatalf("publish on a closed connection: %v, want a retryable error", err)
	}
}
