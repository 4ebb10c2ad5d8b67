//go:build !race

// rocketmq-client-go's push consumer has data races of its own (its
// process queue's tree is read and written by different goroutines), so
// this file is built only without -race; `make test` runs it in a
// race-free pass (target rocketmq).

package rocketmq

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/mq/mqtest"
)

// A key's batch goes to the queue its single messages go to, for 50 keys
// over the topic's 8 queues: otherwise a room's batch could pass its
// earlier single message.
func TestRocketMQBatchSharesTheKeysQueue(t *testing.T) {
	in := sharedInstance()
	c := in.dial(t)
	topic := in.topic(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	queues := map[int]bool{}
	for r := range 50 {
		key := fmt.Sprintf("app/room-%d", r)
		single, err := c.send(ctx, topic, key, []*primitive.Message{newMessage(topic, "RoomUserJoined", key+"#1", key, []byte("{}"))})
		if err != nil {
			t.Fatal(err)
		}
		batch := nextChunk(topic, key, []mq.Outgoing{{Tag: "RoomUserJoined", Key: key + "#2", Data: []byte("{}")},
			{Tag: "RoomUserJoined", Key: key + "#3", Data: []byte("{}")}})
		if len(batch) != 2 {
			t.Fatalf("chunk of %d, want 2", len(batch))
		}
		batched, err := c.send(ctx, topic, key, batch)
		if err != nil {
			t.Fatal(err)
		}
		if single.MessageQueue.QueueId != batched.MessageQueue.QueueId || single.MessageQueue.BrokerName != batched.MessageQueue.BrokerName {
			t.Fatalf("%s: single message on %v, batch on %v", key, single.MessageQueue, batched.MessageQueue)
		}
		queues[single.MessageQueue.QueueId] = true
	}
	if len(queues) < 4 {
		t.Fatalf("50 keys on %d queues: the hash does not spread them", len(queues))
	}
}

// A batch larger than one request (2,000 messages of 1 KiB: the message
// and byte bounds both cut it) is stored whole, in order, on the key's
// queue: an Ordered group gets 1..2000 once each; and the count says so.
func TestRocketMQBatchChunksKeepOrder(t *testing.T) {
	in := sharedInstance()
	c := in.dial(t)
	topic := in.topic(t)
	const n = 2000
	var mu sync.Mutex
	var got []int
	mqtest.Subscribe(t, c, mq.Subscription{Topic: topic, Group: "chunks-" + instanceID(), Ordered: true, MaxRedeliver: 3,
		Handler: func(_ context.Context, m mq.Message) error {
			_, seq, _ := strings.Cut(m.Key, "#")
			i, err := strconv.Atoi(seq)
			if err != nil || len(m.Data) != 1024 {
				return fmt.Errorf("%w: bad message %q", mq.ErrDrop, m.Key)
			}
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
			return nil
		}})
	msgs := make([]mq.Outgoing, n)
	for i := range msgs {
		msgs[i] = mq.Outgoing{Tag: "RoomUserJoined", Key: fmt.Sprintf("app/hot#%d", i+1), Data: make([]byte, 1024)}
	}
	if chunk := nextChunk(topic, "app/hot", msgs); len(chunk) >= n {
		t.Fatalf("one chunk of %d: the bounds do not cut", len(chunk))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stored, err := c.PublishOrderedBatch(ctx, topic, "app/hot", msgs)
	if err != nil || stored != n {
		t.Fatalf("stored %d of %d: %v", stored, n, err)
	}
	mqtest.WaitUntil(t, 60*time.Second, "every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n
	})
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(got, want) {
		t.Fatalf("handled %d messages, not 1..%d in order (first out of place at %d)", len(got), n, firstDiff(got, want))
	}
}

// A batch whose middle message the broker refuses (5 MiB of random bytes,
// over its 4 MiB maxMessageSize) stores what came before it, says how
// many, and fails with a permanent error: the relay then sends the rest
// one by one and parks only that one.
func TestRocketMQBatchWithAnOversizedMessage(t *testing.T) {
	in := sharedInstance()
	c := in.dial(t)
	topic := in.topic(t)
	huge := make([]byte, 5<<20)
	_, _ = rand.Read(huge)
	msgs := []mq.Outgoing{{Tag: "RoomUserJoined", Key: "k1", Data: []byte("{}")}, {Tag: "RoomUserJoined", Key: "k2", Data: huge},
		{Tag: "RoomUserJoined", Key: "k3", Data: []byte("{}")}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stored, err := c.PublishOrderedBatch(ctx, topic, "app/r1", msgs)
	if stored != 1 || err == nil {
		t.Fatalf("stored %d, error %v: want 1 and the refusal", stored, err)
	}
	var p interface{ Permanent() bool }
	if !errors.As(err, &p) || !p.Permanent() {
		t.Fatalf("%v is not permanent: the relay would retry it forever", err)
	}
	if !strings.Contains(err.Error(), "k2") {
		t.Fatalf("%v does not name the refused message k2", err)
	}
}

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// 300 keys hand in 6 batches each at once (after one message taught the
// client the topic's 8 queues): batches of keys on one queue share
// requests, and an Ordered group still gets each key's messages once, in
// order; a batch whose caller gave up while it waited is not sent.
func TestRocketMQLanesMergeKeysAndKeepOrder(t *testing.T) {
	in := sharedInstance()
	c := in.dial(t)
	topic := in.topic(t)
	const keys, batches, per = 300, 6, 3
	var mu sync.Mutex
	seen := map[string][]int{}
	mqtest.Subscribe(t, c, mq.Subscription{Topic: topic, Group: "lanes-" + instanceID(), Ordered: true, MaxRedeliver: 3,
		Handler: func(_ context.Context, m mq.Message) error {
			room, seq, _ := strings.Cut(m.Key, "#")
			i, err := strconv.Atoi(seq)
			if err != nil {
				return fmt.Errorf("%w: bad key %q", mq.ErrDrop, m.Key)
			}
			mu.Lock()
			seen[room] = append(seen[room], i)
			mu.Unlock()
			return nil
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.PublishOrdered(ctx, topic, "RoomUserJoined", "first#0", "first", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if c.laneFor(topic, "app/k", 10, 1) == nil {
		t.Fatal("no lane after a send: the queue count was not learned")
	}
	var wg sync.WaitGroup
	errs := make(chan error, keys)
	for k := range keys {
		wg.Go(func() {
			room := fmt.Sprintf("app/k%03d", k)
			for b := range batches {
				var msgs []mq.Outgoing
				for i := range per {
					key := fmt.Sprintf("%s#%d", room, b*per+i+1)
					msgs = append(msgs, mq.Outgoing{Tag: "RoomUserJoined", Key: key, Data: []byte("{}")})
				}
				n, err := c.PublishOrderedBatch(ctx, topic, room, msgs)
				if err != nil || n != per {
					errs <- fmt.Errorf("%s batch %d: stored %d: %v", room, b, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if c.merged.Load() == 0 {
		t.Fatal("no request carried two keys: the lanes never merged")
	}
	mqtest.WaitUntil(t, 60*time.Second, "every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for r, s := range seen {
			if r != "first" {
				n += len(s)
			}
		}
		return n >= keys*batches*per
	})
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	want := make([]int, batches*per)
	for i := range want {
		want[i] = i + 1
	}
	for k := range keys {
		room := fmt.Sprintf("app/k%03d", k)
		if !slices.Equal(seen[room], want) {
			t.Fatalf("%s handled %v, want %v", room, seen[room], want)
		}
	}
	t.Logf("%d requests carried several keys", c.merged.Load())

	// A caller whose context is done while its batch waits behind a
	// request in flight: nothing of it is sent later.
	l := c.laneFor(topic, "app/late", 10, 1)
	l.mu.Lock()
	l.running = true // as if a request were in flight
	l.mu.Unlock()
	gone, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.sendInLane(gone, l, topic, "app/late", []mq.Outgoing{{Tag: "RoomUserJoined", Key: "app/late#1", Data: []byte("{}")}}, 10)
	}()
	time.Sleep(100 * time.Millisecond)
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a given-up batch returned %v", err)
	}
	l.mu.Lock()
	left := len(l.waiting)
	l.running = false
	l.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d batches still wait after their callers gave up", left)
	}
}
