package rocketmq

import (
	"context"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/hyapp/roomcell/delivery/mq"
)

// Lanes: the batches of different order keys that land on one message
// queue travel together. The broker's cost is mostly per request (its
// ACL check, its dispatch), and a fanout round has many more rooms than
// the topic has queues, so while one request to a queue is in flight the
// batches that arrive for that queue wait and then go as one request
// (group commit: an idle queue's batch goes at once, alone). Each key
// keeps its order: a key's batches are handed in one after the other and
// a lane sends in arrival order; the broker appends a request as one
// block.

// laneKey names one queue of a topic as the hash over count queues
// places keys on it.
type laneKey struct {
	topic string
	count int
	index int
}

type lane struct {
	mu      sync.Mutex
	running bool
	waiting []*laneReq
}

type laneReq struct {
	orderKey string
	msgs     []mq.Outgoing
	size     int
	taken    bool       // a request carries it; guarded by the lane's mu
	done     chan error // its request's outcome
}

// queueIndex is the queue the hash selector (producer.NewHashQueueSelector:
// fnv-32a of the key, modulo the count) gives key among count queues.
func queueIndex(key string, count int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	i := int(h.Sum32()) % count
	if i < 0 {
		i = -i
	}
	return i
}

// laneFor returns the lane of orderKey's queue, or nil while the topic's
// queue count is not known yet (no send to it so far) or the batch does
// not fit one request.
func (c *Client) laneFor(topic, orderKey string, size, n int) *lane {
	v, ok := c.queueCounts.Load(topic)
	if !ok || orderKey == "" || size > maxBatchBytes || n > maxBatchMessages {
		return nil
	}
	count := v.(int)
	if count <= 0 {
		return nil
	}
	k := laneKey{topic: topic, count: count, index: queueIndex(orderKey, count)}
	l, _ := c.lanes.LoadOrStore(k, &lane{})
	return l.(*lane)
}

// sendInLane hands one key's batch to its queue's lane and waits for the
// request that carries it. A ctx that ends while the batch still waits
// takes it out (nothing sent); once a request carries it, the outcome is
// that request's (bounded by the send timeout).
func (c *Client) sendInLane(ctx context.Context, l *lane, topic, orderKey string, msgs []mq.Outgoing, size int) error {
	r := &laneReq{orderKey: orderKey, msgs: msgs, size: size, done: make(chan error, 1)}
	l.mu.Lock()
	l.waiting = append(l.waiting, r)
	if !l.running {
		l.running = true
		go c.runLane(l, topic)
	}
	l.mu.Unlock()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	l.mu.Lock()
	if !r.taken {
		for i, w := range l.waiting {
			if w == r {
				l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
				break
			}
		}
		l.mu.Unlock()
		return ctx.Err()
	}
	l.mu.Unlock()
	return <-r.done
}

// runLane sends the lane's waiting batches, as many as fit one request at
// a time, until none wait.
func (c *Client) runLane(l *lane, topic string) {
	for {
		l.mu.Lock()
		if len(l.waiting) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		var reqs []*laneReq
		size, n := 0, 0
		for len(l.waiting) > 0 {
			r := l.waiting[0]
			if len(reqs) > 0 && (size+r.size > maxBatchBytes || n+len(r.msgs) > maxBatchMessages) {
				break
			}
			r.taken = true
			reqs = append(reqs, r)
			size, n = size+r.size, n+len(r.msgs)
			l.waiting = l.waiting[1:]
		}
		l.mu.Unlock()
		err := c.sendMerged(topic, reqs)
		for _, r := range reqs {
			r.done <- err
		}
	}
}

// sendMerged sends the batches of several keys of one queue as one
// request, each key's messages in its order.
func (c *Client) sendMerged(topic string, reqs []*laneReq) error {
	var msgs []*primitive.Message
	keys := make([]string, 0, len(reqs))
	for _, r := range reqs {
		keys = append(keys, r.orderKey)
		for _, m := range r.msgs {
			msgs = append(msgs, newMessage(topic, m.Tag, m.Key, r.orderKey, m.Data))
		}
	}
	if len(msgs) > 1 {
		for _, m := range msgs {
			m.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, primitive.CreateUniqID())
		}
		// Every key of the request: orderSelector sends it to their one
		// queue, or nowhere if the topic's queues changed under them.
		msgs[0].Queue = &primitive.MessageQueue{Topic: topic, BrokerName: orderMarker + strings.Join(keys, orderSep)}
	}
	if len(reqs) > 1 {
		c.merged.Add(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.sendTO)
	defer cancel()
	_, err := c.send(ctx, topic, reqs[0].msgs[0].Key, msgs)
	return err
}
