// Package mqtest is the one contract suite every delivery/mq
// implementation runs (JetStream in delivery/mq, RocketMQ in
// delivery/mq/rocketmq): publish with key, tag and data; order per order
// key from 100 keys at once, with batches where the implementation takes
// them; redelivery of a failed message; the last
// delivery and the dead letter; a consumer stopped and started again
// losing nothing. It imports only delivery/mq and the standard library.
package mqtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyapp/roomcell/delivery/mq"
)

// Client is what an implementation offers.
type Client interface {
	mq.OrderedPublisher
	mq.Publisher
	mq.Subscriber
}

// Harness builds the implementation under test.
type Harness struct {
	// Client connects a client; it is closed at the end of the test.
	Client func(t *testing.T) Client
	// Topic returns a fresh topic that exists (and is removed at the end).
	Topic func(t *testing.T, c Client) string
	// DeadLetters, if the broker keeps dead letters, returns the keys of
	// the messages in group's dead-letter store. nil: it drops them.
	DeadLetters func(t *testing.T, c Client, topic, group string) []string
	// Batches: the client is an mq.OrderedBatchPublisher too, and the
	// suite checks its batches' order.
	Batches bool
	// Wait is how long a message may take to arrive (default 30 s); the
	// redelivery tests wait for the broker's own delays.
	Wait time.Duration
}

// Run runs the contract suite.
func Run(t *testing.T, h Harness) {
	if h.Wait == 0 {
		h.Wait = 30 * time.Second
	}
	t.Run("publish", func(t *testing.T) { testPublish(t, h) })
	t.Run("order_per_key", func(t *testing.T) { testOrder(t, h) })
	if h.Batches {
		t.Run("order_per_key_batches", func(t *testing.T) { testOrderBatches(t, h) })
	}
	t.Run("redelivery_and_dead_letter", func(t *testing.T) { testRedelivery(t, h) })
	t.Run("consumer_restart", func(t *testing.T) { testRestart(t, h) })
}

// Received collects handled messages.
type Received struct {
	mu   sync.Mutex
	msgs []mq.Message
}

// Add records m.
func (r *Received) Add(m mq.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

// All returns what was recorded, in order.
func (r *Received) All() []mq.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// Deliveries lists the delivery numbers key was handled with.
func (r *Received) Deliveries(key string) []int {
	var out []int
	for _, m := range r.All() {
		if m.Key == key {
			out = append(out, m.Delivery)
		}
	}
	return out
}

// Keys counts the handled keys.
func (r *Received) Keys() map[string]int {
	out := map[string]int{}
	for _, m := range r.All() {
		out[m.Key]++
	}
	return out
}

// WaitUntil polls cond until it holds or d passes.
func WaitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Subscribe starts s on c and stops it at the end of the test.
func Subscribe(t *testing.T, c mq.Subscriber, s mq.Subscription) mq.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, err := c.Subscribe(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = k.Stop(ctx)
	})
	return k
}

// Publish publishes one message and fails the test on an error.
func Publish(t *testing.T, p mq.Publisher, topic, tag, key, data string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Publish(ctx, topic, tag, key, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// A group gets the messages of its tags with key, tag and data; another
// group gets every message again, independently.
func testPublish(t *testing.T, h Harness) {
	c := h.Client(t)
	topic := h.Topic(t, c)
	Publish(t, c, topic, "RoomUserKicked", "k1", `{"n":1}`)
	Publish(t, c, topic, "RoomUserJoined", "j1", `{"n":2}`)
	Publish(t, c, topic, "RoomUserKicked", "k2", `{"n":3}`)
	var got, all Received
	Subscribe(t, c, mq.Subscription{Topic: topic, Group: "notice" + suffix(topic), Tags: []string{"RoomUserKicked"}, MaxRedeliver: 3,
		Handler: func(_ context.Context, m mq.Message) error { got.Add(m); return nil }})
	Subscribe(t, c, mq.Subscription{Topic: topic, Group: "audit" + suffix(topic),
		Handler: func(_ context.Context, m mq.Message) error { all.Add(m); return nil }})
	WaitUntil(t, h.Wait, "the two kicks", func() bool { return len(got.Keys()) == 2 })
	WaitUntil(t, h.Wait, "every message in the second group", func() bool { return len(all.Keys()) == 3 })
	time.Sleep(500 * time.Millisecond)
	if k := got.Keys(); k["j1"] != 0 || k["k1"] != 1 || k["k2"] != 1 {
		t.Fatalf("tagged group got %v, want k1 and k2 once each and not the join", k)
	}
	for _, m := range got.All() {
		want := map[string]string{"k1": `{"n":1}`, "k2": `{"n":3}`}[m.Key]
		if m.Tag != "RoomUserKicked" || string(m.Data) != want || m.Delivery != 1 || m.Topic != topic {
			t.Fatalf("message %+v (data %s)", m, m.Data)
		}
	}
}

// 100 keys publish 10 messages each, concurrently across keys and one
// after the other within a key: an Ordered group gets each key's messages
// once each, in publish order.
func testOrder(t *testing.T, h Harness) {
	c := h.Client(t)
	topic := h.Topic(t, c)
	const keys, per = 100, 10
	seen := subscribeOrdered(t, c, topic, "ordered"+suffix(topic), nil)
	publishPerKey(t, keys, func(room string) error {
		for i := 1; i <= per; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.PublishOrdered(ctx, topic, "RoomUserJoined", fmt.Sprintf("%s#%d", room, i), room, []byte("{}"))
			cancel()
			if err != nil {
				return err
			}
		}
		return nil
	})
	seen.check(t, h, keys, per)
}

// An implementation that takes batches (mq.OrderedBatchPublisher): 100
// keys publish 20 messages each, concurrently across keys, as single
// messages and batches in turn (1-3 one by one, 4-10 in a batch, 11
// alone, 12-20 in a batch): a key's batches land on the same queue as its
// single messages, so an Ordered group gets each key's messages once
// each, in publish order.
func testOrderBatches(t *testing.T, h Harness) {
	c := h.Client(t)
	bp, ok := c.(mq.OrderedBatchPublisher)
	if !ok {
		t.Fatal("the harness says Batches but the client is no mq.OrderedBatchPublisher")
	}
	topic := h.Topic(t, c)
	const keys, per = 100, 20
	seen := subscribeOrdered(t, c, topic, "batches"+suffix(topic), func(m mq.Message) bool {
		return m.Tag == "RoomUserJoined" && string(m.Data) == m.Key
	})
	publishPerKey(t, keys, func(room string) error {
		msg := func(i int) mq.Outgoing {
			k := fmt.Sprintf("%s#%d", room, i)
			return mq.Outgoing{Tag: "RoomUserJoined", Key: k, Data: []byte(k)}
		}
		for _, run := range [][2]int{{1, 1}, {2, 2}, {3, 3}, {4, 10}, {11, 11}, {12, 20}} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var err error
			if run[0] == run[1] {
				m := msg(run[0])
				err = c.PublishOrdered(ctx, topic, m.Tag, m.Key, room, m.Data)
			} else {
				var batch []mq.Outgoing
				for i := run[0]; i <= run[1]; i++ {
					batch = append(batch, msg(i))
				}
				var n int
				n, err = bp.PublishOrderedBatch(ctx, topic, room, batch)
				if err == nil && n != len(batch) {
					err = fmt.Errorf("%s: batch %v stored %d of %d without an error", room, run, n, len(batch))
				}
			}
			cancel()
			if err != nil {
				return err
			}
		}
		return nil
	})
	seen.check(t, h, keys, per)
}

// ordered records, per key ("<room>#<n>"), the n of each message an
// Ordered group handled, in handling order.
type ordered struct {
	mu   sync.Mutex
	seen map[string][]int
}

// subscribeOrdered starts an Ordered group on topic; valid, if set,
// refuses (drops) messages it does not accept.
func subscribeOrdered(t *testing.T, c mq.Subscriber, topic, group string, valid func(mq.Message) bool) *ordered {
	o := &ordered{seen: map[string][]int{}}
	Subscribe(t, c, mq.Subscription{Topic: topic, Group: group, Ordered: true, MaxRedeliver: 3,
		Handler: func(_ context.Context, m mq.Message) error {
			room, seq, ok := strings.Cut(m.Key, "#")
			n, err := strconv.Atoi(seq)
			if !ok || err != nil || (valid != nil && !valid(m)) {
				return fmt.Errorf("%w: bad message %q (tag %q)", mq.ErrDrop, m.Key, m.Tag)
			}
			o.mu.Lock()
			o.seen[room] = append(o.seen[room], n)
			o.mu.Unlock()
			return nil
		}})
	return o
}

// publishPerKey runs publish for keys rooms ("app/room-000" ...) at once
// and fails the test on any error.
func publishPerKey(t *testing.T, keys int, publish func(room string) error) {
	var wg sync.WaitGroup
	errs := make(chan error, keys)
	for r := range keys {
		wg.Go(func() {
			if err := publish(fmt.Sprintf("app/room-%03d", r)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// check waits for keys × per messages and then wants each key's 1..per,
// each once, in order.
func (o *ordered) check(t *testing.T, h Harness, keys, per int) {
	total := func() int {
		o.mu.Lock()
		defer o.mu.Unlock()
		n := 0
		for _, s := range o.seen {
			n += len(s)
		}
		return n
	}
	WaitUntil(t, h.Wait, "every message", func() bool { return total() >= keys*per })
	time.Sleep(500 * time.Millisecond)
	o.mu.Lock()
	defer o.mu.Unlock()
	want := make([]int, per)
	for i := range want {
		want[i] = i + 1
	}
	if len(o.seen) != keys {
		t.Fatalf("%d keys seen, want %d", len(o.seen), keys)
	}
	for room, got := range o.seen {
		if !slices.Equal(got, want) {
			t.Fatalf("%s handled in order %v, want %v", room, got, want)
		}
	}
}

// A failed message comes back (delivery 2, 3 ...) until it succeeds; one
// that keeps failing is delivered 1+MaxRedeliver times and then no more
// (into the dead-letter store where the broker has one); ErrDrop ends it
// at its first delivery.
func testRedelivery(t *testing.T, h Harness) {
	c := h.Client(t)
	topic := h.Topic(t, c)
	group := "notice" + suffix(topic)
	var got Received
	Subscribe(t, c, mq.Subscription{Topic: topic, Group: group, MaxRedeliver: 2, RedeliverAfter: 50 * time.Millisecond,
		Handler: func(_ context.Context, m mq.Message) error {
			got.Add(m)
			switch {
			case m.Key == "flaky" && m.Delivery < 3:
				return errors.New("store down")
			case m.Key == "broken":
				return errors.New("store down for good")
			case m.Key == "garbage":
				return fmt.Errorf("%w: does not decode", mq.ErrDrop)
			}
			return nil
		}})
	for _, k := range []string{"flaky", "broken", "garbage", "fine"} {
		Publish(t, c, topic, "RoomUserKicked", k, "{}")
	}
	WaitUntil(t, h.Wait, "flaky's third delivery", func() bool { return len(got.Deliveries("flaky")) >= 3 })
	WaitUntil(t, h.Wait, "broken's last delivery", func() bool { return len(got.Deliveries("broken")) >= 3 })
	time.Sleep(3 * time.Second) // longer than the redelivery delays
	for key, want := range map[string][]int{"flaky": {1, 2, 3}, "broken": {1, 2, 3}, "garbage": {1}, "fine": {1}} {
		if got := got.Deliveries(key); !slices.Equal(got, want) {
			t.Fatalf("%s delivered %v, want %v", key, got, want)
		}
	}
	for _, m := range got.All() {
		if m.Topic != topic || string(m.Data) != "{}" || m.Tag != "RoomUserKicked" {
			t.Fatalf("a redelivered message lost its identity: %+v", m)
		}
	}
	if h.DeadLetters == nil {
		return
	}
	var dead []string
	WaitUntil(t, h.Wait, "the dead letters", func() bool {
		dead = h.DeadLetters(t, c, topic, group)
		return len(dead) >= 2
	})
	slices.Sort(dead)
	if !slices.Equal(slices.Compact(dead), []string{"broken", "garbage"}) {
		t.Fatalf("dead letters %v, want broken and garbage", dead)
	}
}

// A consumer stopped halfway and a new member of the same group started
// later: every message is handled (at least once), the ones published
// while no member ran included.
func testRestart(t *testing.T, h Harness) {
	c := h.Client(t)
	topic := h.Topic(t, c)
	group := "restart" + suffix(topic)
	var first, second Received
	k := Subscribe(t, c, mq.Subscription{Topic: topic, Group: group,
		Handler: func(_ context.Context, m mq.Message) error { first.Add(m); return nil }})
	for i := range 50 {
		Publish(t, c, topic, "RoomUserKicked", fmt.Sprint("a", i), "{}")
	}
	WaitUntil(t, h.Wait, "the first 50", func() bool { return len(first.Keys()) == 50 })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	if err := k.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	for i := range 50 {
		Publish(t, c, topic, "RoomUserKicked", fmt.Sprint("b", i), "{}")
	}
	Subscribe(t, c, mq.Subscription{Topic: topic, Group: group,
		Handler: func(_ context.Context, m mq.Message) error { second.Add(m); return nil }})
	WaitUntil(t, h.Wait, "the 50 published while stopped", func() bool {
		n := 0
		for key := range second.Keys() {
			if strings.HasPrefix(key, "b") {
				n++
			}
		}
		return n == 50
	})
	all := first.Keys()
	for key, n := range second.Keys() {
		all[key] += n
	}
	if len(all) != 100 {
		t.Fatalf("%d distinct keys handled, want 100", len(all))
	}
}

// suffix makes group names unique per topic (groups outlive topics on
// some brokers).
func suffix(topic string) string {
	if i := strings.LastIndexByte(topic, '_'); i >= 0 {
		return "-" + topic[i+1:]
	}
	return ""
}
