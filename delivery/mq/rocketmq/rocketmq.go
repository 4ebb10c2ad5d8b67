package rocketmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/mq"
)

// DefaultSendTimeout bounds one SendSync when the caller's context has no
// earlier deadline.
const DefaultSendTimeout = 3 * time.Second

// delayLevels are the broker's default messageDelayLevel ("1s 5s 10s 30s
// 1m 2m ..."): a retried message comes back after the first level at least
// as long as the wait asked for.
var delayLevels = []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute,
	7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour}

// Client is the RocketMQ implementation of mq.Publisher,
// mq.OrderedPublisher and mq.Subscriber. Safe for concurrent use.
type Client struct {
	servers []string
	cred    primitive.Credentials
	log     *slog.Logger
	sendTO  time.Duration
	id      string

	prod rmq.Producer
	// queueCounts: topic → how many queues the producer last saw it have
	// (orderSelector writes it); lanes: laneKey → *lane (lanes.go).
	queueCounts *sync.Map
	lanes       sync.Map
	// merged counts the lanes' requests that carried several keys.
	merged atomic.Int64

	mu        sync.Mutex
	consumers []*rmqConsumer
	closed    bool
}

var (
	_ mq.Publisher             = (*Client)(nil)
	_ mq.OrderedPublisher      = (*Client)(nil)
	_ mq.OrderedBatchPublisher = (*Client)(nil)
	_ mq.Subscriber            = (*Client)(nil)
)

// Option tunes Dial.
type Option func(*Client)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithSendTimeout sets the bound of one send (default DefaultSendTimeout).
func WithSendTimeout(d time.Duration) Option { return func(c *Client) { c.sendTO = d } }

// Dial starts a producer on cfg.Servers (the name servers, host:port) with
// cfg.AccessKey/SecretKey as ACL credentials. It does not wait for the
// name server: a broker that cannot be reached, refuses the credentials or
// lacks the topic fails the publishes (the relay retries them, the room
// path never waits on them), and a probe logs the reason at once. cfg is
// as configs loaded it (defaults applied and checked there, once).
func Dial(ctx context.Context, cfg configs.MQConfig, opts ...Option) (*Client, error) {
	if cfg.Kind != configs.MQKindRocketMQ {
		return nil, fmt.Errorf("rocketmq: kind %q is not rocketmq", cfg.Kind)
	}
	installLogger()
	c := &Client{servers: nameServers(cfg.Servers), log: slog.Default(), sendTO: DefaultSendTimeout, id: instanceID(),
		queueCounts: &sync.Map{}}
	if cfg.AccessKey != "" {
		c.cred = primitive.Credentials{AccessKey: cfg.AccessKey, SecretKey: cfg.SecretKey}
	}
	for _, o := range opts {
		o(c)
	}
	c.log = c.log.With("component", "mq", "kind", configs.MQKindRocketMQ)
	popts := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver(c.servers)),
		producer.WithGroupName("roomcell-" + c.id),
		producer.WithInstanceName("roomcell-producer-" + c.id),
		// One queue per order key (a room): the hash of the sharding key,
		// for a batch too.
		producer.WithQueueSelector(orderSelector{hash: producer.NewHashQueueSelector(), counts: c.queueCounts}),
		// No client-side resend: a resend could reach another queue (out
		// of the room's order) and the relay retries the row anyway.
		producer.WithRetry(0),
		producer.WithSendMsgTimeout(c.sendTO),
	}
	if c.cred.AccessKey != "" {
		popts = append(popts, producer.WithCredentials(c.cred))
	}
	p, err := rmq.NewProducer(popts...)
	if err != nil {
		return nil, fmt.Errorf("rocketmq: producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("rocketmq: start producer: %w", c.clean(err))
	}
	c.prod = p
	c.log.Info("mq producer started", "name_servers", c.servers, "access_key_set", c.cred.AccessKey != "")
	if cfg.RoomOutbox.Topic != "" {
		go c.probe(cfg.RoomOutbox.Topic)
	}
	return c, nil
}

// nameServers writes a name server given by host name as http://host:port:
// the client takes IP addresses as host:port but names only in that form
// (as Tencent Cloud gives its name servers), and connects to host:port
// either way.
func nameServers(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		host, _, err := net.SplitHostPort(s)
		if err == nil && net.ParseIP(host) == nil && !strings.Contains(s, "://") {
			s = "http://" + s
		}
		out = append(out, s)
	}
	return out
}

func instanceID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// probe reports at start, once, whether the topic's route can be read from
// the name servers: an unreachable name server or a missing topic shows in
// the log at start instead of only on the first publish.
func (c *Client) probe(topic string) {
	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(c.servers)), admin.WithCredentials(c.cred))
	if err != nil {
		return
	}
	defer func() { _ = a.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.FetchPublishMessageQueues(ctx, topic); err != nil {
		c.log.Warn("mq topic not reachable: publishes fail until it is (the relay retries them)", "topic", topic,
			"name_servers", c.servers, "error", c.clean(err))
	}
}

// Close stops the producer and every consumer of c.
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	cons := c.consumers
	c.consumers = nil
	c.mu.Unlock()
	for _, k := range cons {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = k.Stop(ctx)
		cancel()
	}
	_ = c.prod.Shutdown()
}

// Publish implements mq.Publisher: a message on a queue chosen at random.
func (c *Client) Publish(ctx context.Context, topic, tag, key string, data []byte) error {
	return c.PublishOrdered(ctx, topic, tag, key, "", data)
}

// PublishOrdered implements mq.OrderedPublisher: the messages of one
// orderKey go to one message queue (the hash of orderKey over the topic's
// queues), so a sender that publishes them one after the other (SendSync)
// stores them in that order, and an orderly consumer gets them in it.
func (c *Client) PublishOrdered(ctx context.Context, topic, tag, key, orderKey string, data []byte) error {
	if err := c.usable(ctx, topic, key); err != nil {
		return err
	}
	_, err := c.send(ctx, topic, key, []*primitive.Message{newMessage(topic, tag, key, orderKey, data)})
	return err
}

// Batches stay far under the broker's maxMessageSize (4 MiB by default),
// which counts a batch request's body as a whole; each message adds its
// properties (tag, key, order key, unique id) to its body.
const (
	maxBatchBytes    = 1 << 20
	maxBatchMessages = 512
	messageOverhead  = 256
)

// PublishOrderedBatch implements mq.OrderedBatchPublisher: msgs go to
// orderKey's message queue (the queue PublishOrdered picks for it) in
// chunks of up to maxBatchBytes, one SendSync of a batch per chunk, one
// chunk after the other. The broker appends a batch to the queue as one
// block, in slice order. A round trip to the broker costs several times
// what encoding a message does, so this is what makes a room's backlog
// move at broker speed instead of one message per round trip.
func (c *Client) PublishOrderedBatch(ctx context.Context, topic, orderKey string, msgs []mq.Outgoing) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	if err := c.usable(ctx, topic, msgs[0].Key); err != nil {
		return 0, err
	}
	size := 0
	for _, m := range msgs {
		size += len(m.Data) + len(m.Key) + len(m.Tag) + len(orderKey) + messageOverhead
	}
	if l := c.laneFor(topic, orderKey, size, len(msgs)); l != nil {
		if err := c.sendInLane(ctx, l, topic, orderKey, msgs, size); err != nil {
			return 0, err
		}
		return len(msgs), nil
	}
	stored := 0
	for stored < len(msgs) {
		chunk := nextChunk(topic, orderKey, msgs[stored:])
		if _, err := c.send(ctx, topic, msgs[stored].Key, chunk); err != nil {
			return stored, err
		}
		stored += len(chunk)
	}
	return stored, nil
}

// nextChunk builds the first request's worth of msgs: at least one
// message, at most maxBatchMessages and (past the first) maxBatchBytes.
func nextChunk(topic, orderKey string, msgs []mq.Outgoing) []*primitive.Message {
	chunk := make([]*primitive.Message, 0, min(len(msgs), maxBatchMessages))
	size := 0
	for _, m := range msgs {
		n := len(m.Data) + len(m.Key) + len(m.Tag) + len(orderKey) + messageOverhead
		if len(chunk) == maxBatchMessages || (len(chunk) > 0 && size+n > maxBatchBytes) {
			break
		}
		size += n
		chunk = append(chunk, newMessage(topic, m.Tag, m.Key, orderKey, m.Data))
	}
	if len(chunk) > 1 {
		// Each message of a batch carries its own unique id, as the Java
		// client's MessageBatch gives it (the Go client sets one only on a
		// single message).
		for _, m := range chunk {
			m.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, primitive.CreateUniqID())
		}
		if orderKey != "" {
			// The batch request is one message the client builds from the
			// first one's Queue: orderSelector reads the order key from
			// there (the batch has no properties of its own).
			chunk[0].Queue = &primitive.MessageQueue{Topic: topic, BrokerName: orderMarker + orderKey}
		}
	}
	return chunk
}

func newMessage(topic, tag, key, orderKey string, data []byte) *primitive.Message {
	msg := primitive.NewMessage(topic, data)
	if tag != "" {
		msg.WithTag(tag)
	}
	if key != "" {
		msg.WithKeys([]string{key})
	}
	if orderKey != "" {
		msg.WithShardingKey(orderKey)
	}
	return msg
}

// usable refuses a publish on a closed client or a done context.
func (c *Client) usable(ctx context.Context, topic, key string) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("rocketmq: publish %s to %s: %w", key, topic, mq.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rocketmq: publish %s to %s: %w", key, topic, err)
	}
	return nil
}

// send sends msgs (one message, or a batch on one queue) with SendSync;
// key names the first in errors. The result says where they went.
func (c *Client) send(ctx context.Context, topic, key string, msgs []*primitive.Message) (*primitive.SendResult, error) {
	res, err := c.prod.SendSync(ctx, msgs...)
	if err == nil && res != nil && res.Status != primitive.SendOK {
		// FlushDiskTimeout and the slave statuses: stored on the master,
		// not yet as durable as asked. The relay sends again (a duplicate
		// the consumers absorb by event_id) rather than count it done.
		err = fmt.Errorf("send status %d", res.Status)
	}
	if err != nil {
		err = c.clean(err)
		if permanent(err) {
			err = permanentError{err}
		}
		if len(msgs) > 1 {
			return nil, fmt.Errorf("rocketmq: publish a batch of %d from %s to %s: %w", len(msgs), key, topic, err)
		}
		return nil, fmt.Errorf("rocketmq: publish %s to %s: %w", key, topic, err)
	}
	return res, nil
}

// orderMarker starts the BrokerName of the Queue PublishOrderedBatch puts
// on a batch's first message: the rest is the batch's order keys,
// separated by orderSep. No broker is named so.
const (
	orderMarker = "\x00order:"
	orderSep    = "\x00"
)

// orderSelector picks a message's queue: the hash of its order key over
// the topic's queues (producer.NewHashQueueSelector, so a key's single
// messages and its batches share one queue), a random one without a key.
// A batch of several keys goes to their common queue, or nowhere (the
// send fails, the caller sends again) when the topic's queues changed and
// the keys no longer share one. It notes the topic's queue count for the
// lanes.
type orderSelector struct {
	hash   producer.QueueSelector
	counts *sync.Map
}

func (s orderSelector) Select(msg *primitive.Message, queues []*primitive.MessageQueue, lastBroker string) *primitive.MessageQueue {
	if v, ok := s.counts.Load(msg.Topic); !ok || v.(int) != len(queues) {
		s.counts.Store(msg.Topic, len(queues))
	}
	if msg.Batch && msg.Queue != nil && strings.HasPrefix(msg.Queue.BrokerName, orderMarker) {
		var q *primitive.MessageQueue
		for _, key := range strings.Split(strings.TrimPrefix(msg.Queue.BrokerName, orderMarker), orderSep) {
			keyed := primitive.NewMessage(msg.Topic, nil)
			keyed.WithShardingKey(key)
			k := s.hash.Select(keyed, queues, lastBroker)
			if q != nil && k != q {
				return nil
			}
			q = k
		}
		return q
	}
	return s.hash.Select(msg, queues, lastBroker)
}

// permanent reports errors no retry of the same message can fix: the
// broker refusing the body as too large (MESSAGE_ILLEGAL, code 13: "CODE:
// 13, DESC: the message is illegal ..." from a 5.x broker).
func permanent(err error) bool {
	s := err.Error()
	return strings.Contains(s, "message body size exceeds") || strings.Contains(s, "CODE: 13 ") || strings.Contains(s, "CODE: 13,")
}

type permanentError struct{ error }

func (e permanentError) Permanent() bool { return true }
func (e permanentError) Unwrap() error   { return e.error }

// clean makes a client error say what it means and keeps the secret key
// out of it (the client never puts it there; this is the second line).
func (c *Client) clean(err error) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	if c.cred.SecretKey != "" && strings.Contains(s, c.cred.SecretKey) {
		s = strings.ReplaceAll(s, c.cred.SecretKey, "[secret]")
		err = errors.New(s)
	}
	switch {
	case strings.Contains(s, "AclException") || strings.Contains(s, "signature") || strings.Contains(s, "No accessKey"):
		return fmt.Errorf("the broker refused the credentials (notice.mq.access_key %q and its secret_key): %w", c.cred.AccessKey, err)
	case strings.Contains(s, "route info not found") && !c.nameServerUp():
		// The client says the same when it could not ask at all.
		return fmt.Errorf("name servers %v unreachable: %w", c.servers, err)
	case strings.Contains(s, "route info not found"):
		return fmt.Errorf("topic not found on the name servers %v (create it on the cluster): %w", c.servers, err)
	case strings.Contains(s, "connection refused") || strings.Contains(s, "dial tcp") || strings.Contains(s, "i/o timeout"):
		return fmt.Errorf("name server or broker unreachable (name servers %v): %w", c.servers, err)
	}
	return err
}

// nameServerUp reports whether any name server accepts a connection.
func (c *Client) nameServerUp() bool {
	for _, s := range c.servers {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
		if conn, err := net.DialTimeout("tcp", s, 500*time.Millisecond); err == nil {
			_ = conn.Close()
			return true
		}
	}
	return false
}

// Subscribe implements mq.Subscriber: a push consumer of group s.Group in
// clustering mode (the members of a group share the queues), from the
// first offset for a new group, filtered by s.Tags ("a || b").
//
// A Handler error has the message sent back to the broker, which
// redelivers it through the group's retry topic after a delay level
// (the first level not shorter than the wait asked for: RedeliverAfter,
// doubling per delivery); after MaxRedeliver redeliveries the broker moves
// it to the group's dead-letter topic %DLQ%<group>. ErrDrop sends it there
// at once. With s.Ordered each queue is consumed by one handler call at a
// time, in queue order, and a failed message holds its queue (it is
// retried in place after RedeliverAfter, up to MaxRedeliver times, then
// moved to the dead-letter topic).
func (c *Client) Subscribe(ctx context.Context, s mq.Subscription) (mq.Consumer, error) {
	if s.Handler == nil {
		return nil, errors.New("rocketmq: subscription without a handler")
	}
	if s.Topic == "" || s.Group == "" {
		return nil, errors.New("rocketmq: subscription without a topic or a group")
	}
	if s.HandlerTimeout <= 0 {
		s.HandlerTimeout = 10 * time.Second
	}
	if s.RedeliverAfter <= 0 {
		s.RedeliverAfter = time.Second
	}
	if s.MaxRedeliver < 0 {
		s.MaxRedeliver = 0
	}
	copts := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver(c.servers)),
		consumer.WithGroupName(s.Group),
		// Each consumer its own client instance: two members of one group
		// in one process (tests, a restart) do not share a registration.
		consumer.WithInstance("roomcell-" + s.Group + "-" + instanceID()),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithMaxReconsumeTimes(int32(s.MaxRedeliver)),
		consumer.WithConsumeMessageBatchMaxSize(1),
		consumer.WithConsumerOrder(s.Ordered),
		consumer.WithSuspendCurrentQueueTimeMillis(s.RedeliverAfter),
	}
	if c.cred.AccessKey != "" {
		copts = append(copts, consumer.WithCredentials(c.cred))
	}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}
	if len(s.Tags) > 0 {
		sel.Expression = strings.Join(s.Tags, " || ")
	}
	k := &rmqConsumer{log: c.log.With("topic", s.Topic, "group", s.Group), s: s}
	k.base, k.cancel = context.WithCancel(context.Background())
	start := func() (rmq.PushConsumer, error) {
		pc, err := rmq.NewPushConsumer(copts...)
		if err != nil {
			return nil, fmt.Errorf("rocketmq: consumer %s: %w", s.Group, err)
		}
		if err := pc.Subscribe(s.Topic, sel, k.consume); err != nil {
			return nil, fmt.Errorf("rocketmq: subscribe %s on %s: %w", s.Group, s.Topic, c.clean(err))
		}
		if err := pc.Start(); err != nil {
			_ = pc.Shutdown()
			return nil, fmt.Errorf("rocketmq: start consumer %s on %s: %w", s.Group, s.Topic, c.clean(err))
		}
		return pc, nil
	}
	pc, err := start()
	if err != nil {
		// The broker side is wrong (name server down, topic missing):
		// the process still starts (its room path never waits on the
		// broker) and the consumer keeps trying, saying why.
		k.log.Error("mq consumer cannot start yet: retrying every 5s", "error", err)
		go k.retryStart(start)
	} else {
		k.setPC(pc)
		k.log.Info("mq consumer started", "tags", s.Tags, "max_redeliver", s.MaxRedeliver, "ordered", s.Ordered)
	}
	c.mu.Lock()
	c.consumers = append(c.consumers, k)
	c.mu.Unlock()
	return k, nil
}

func (k *rmqConsumer) setPC(pc rmq.PushConsumer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pc = pc
}

func (k *rmqConsumer) retryStart(start func() (rmq.PushConsumer, error)) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-k.base.Done():
			return
		case <-t.C:
		}
		pc, err := start()
		if err != nil {
			k.log.Warn("mq consumer cannot start yet", "error", err)
			continue
		}
		k.mu.Lock()
		if k.stopping {
			k.mu.Unlock()
			_ = pc.Shutdown()
			return
		}
		k.pc = pc
		k.mu.Unlock()
		k.log.Info("mq consumer started", "tags", k.s.Tags, "max_redeliver", k.s.MaxRedeliver, "ordered", k.s.Ordered)
		return
	}
}

type rmqConsumer struct {
	pc     rmq.PushConsumer
	log    *slog.Logger
	s      mq.Subscription
	base   context.Context
	cancel context.CancelFunc

	wg       sync.WaitGroup
	mu       sync.Mutex
	stopping bool
	once     sync.Once
	stopErr  error
}

func (k *rmqConsumer) consume(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	k.mu.Lock()
	if k.stopping {
		k.mu.Unlock()
		// Not handled: the offset is not committed, another member (or
		// this group after a restart) gets the message.
		return k.retry(ctx, 1), nil
	}
	k.wg.Add(1)
	k.mu.Unlock()
	defer k.wg.Done()
	for _, msg := range msgs {
		m := mq.Message{Topic: msg.Topic, Tag: msg.GetTags(), Key: msg.GetKeys(), Data: msg.Body, Delivery: int(msg.ReconsumeTimes) + 1}
		if strings.HasPrefix(m.Topic, "%RETRY%") {
			// A redelivery arrives on the group's retry topic; the
			// original topic is a property.
			if t := msg.GetProperty(primitive.PropertyRetryTopic); t != "" {
				m.Topic = t
			} else {
				m.Topic = k.s.Topic
			}
		}
		hctx, cancel := context.WithTimeout(k.base, k.s.HandlerTimeout)
		err := safeHandle(hctx, k.s.Handler, m)
		cancel()
		if err == nil {
			continue
		}
		attrs := []any{"key", m.Key, "tag", m.Tag, "delivery", m.Delivery, "error", err}
		if errors.Is(err, mq.ErrDrop) {
			k.log.Warn("mq message dropped: it can never be processed; moved to the dead-letter topic", attrs...)
			return k.dead(ctx), nil
		}
		if m.Delivery >= k.s.MaxRedeliver+1 {
			k.log.Error("mq message failed its last delivery: the broker moves it to the dead-letter topic %DLQ%"+k.s.Group, attrs...)
		} else {
			k.log.Warn("mq message failed: redelivering", attrs...)
		}
		return k.retry(ctx, m.Delivery), nil
	}
	return consumer.ConsumeSuccess, nil
}

// retry asks for a redelivery after the wait of this delivery.
func (k *rmqConsumer) retry(ctx context.Context, delivery int) consumer.ConsumeResult {
	if k.s.Ordered {
		return consumer.SuspendCurrentQueueAMoment
	}
	if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
		cc.DelayLevelWhenNextConsume = delayLevel(mq.RedeliverDelay(k.s.RedeliverAfter, delivery))
	}
	return consumer.ConsumeRetryLater
}

// dead sends the message to the dead-letter topic now (delay level -1).
func (k *rmqConsumer) dead(ctx context.Context) consumer.ConsumeResult {
	if k.s.Ordered {
		// An orderly consumer has no per-message level: it is retried in
		// place until max reconsume times, then moved.
		return consumer.SuspendCurrentQueueAMoment
	}
	if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
		cc.DelayLevelWhenNextConsume = -1
	}
	return consumer.ConsumeRetryLater
}

func delayLevel(d time.Duration) int {
	for i, l := range delayLevels {
		if l >= d {
			return i + 1
		}
	}
	return len(delayLevels)
}

func safeHandle(ctx context.Context, h mq.Handler, m mq.Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rocketmq: handler panic: %v", r)
		}
	}()
	return h(ctx, m)
}

// Stop implements mq.Consumer: no new handler call starts, the running
// ones finish (or ctx ends them), then the consumer persists its offsets
// and leaves the group.
func (k *rmqConsumer) Stop(ctx context.Context) error {
	k.once.Do(func() {
		k.mu.Lock()
		k.stopping = true
		k.mu.Unlock()
		idle := make(chan struct{})
		go func() { k.wg.Wait(); close(idle) }()
		select {
		case <-idle:
		case <-ctx.Done():
			k.cancel()
			k.stopErr = fmt.Errorf("rocketmq: consumer stop: %w", ctx.Err())
		}
		k.cancel()
		k.mu.Lock()
		pc := k.pc
		k.mu.Unlock()
		if pc == nil {
			return
		}
		done := make(chan error, 1)
		go func() { done <- pc.Shutdown() }()
		select {
		case err := <-done:
			if err != nil && k.stopErr == nil {
				k.stopErr = fmt.Errorf("rocketmq: consumer shutdown: %w", err)
			}
		case <-ctx.Done():
			if k.stopErr == nil {
				k.stopErr = fmt.Errorf("rocketmq: consumer shutdown: %w", ctx.Err())
			}
		}
	})
	return k.stopErr
}
