package mq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyapp/roomcell/configs"
)

// Stream defaults: a topic keeps three days of messages (a consumer group
// down longer than that misses them; the MySQL scan still has the facts),
// and a publish repeated within two minutes with the same key is stored
// once.
const (
	DefaultStreamMaxAge    = 72 * time.Hour
	DefaultDuplicateWindow = 2 * time.Minute
)

// JetStream is the NATS JetStream implementation of Publisher and
// Subscriber. A topic is a stream of the same name whose subjects are
// "<topic>.<tag>"; a consumer group is a durable pull consumer of that
// stream (explicit ack, max deliveries 1+MaxRedeliver, filtered by tag).
// Safe for concurrent use.
type JetStream struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	log       *slog.Logger
	maxAge    time.Duration
	dupWindow time.Duration

	mu      sync.Mutex
	ensured map[string]bool
}

var (
	_ Publisher        = (*JetStream)(nil)
	_ OrderedPublisher = (*JetStream)(nil)
	_ Subscriber       = (*JetStream)(nil)
)

// Option tunes DialJetStream.
type Option func(*JetStream)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(j *JetStream) { j.log = l } }

// WithStreamMaxAge sets how long a topic keeps messages.
func WithStreamMaxAge(d time.Duration) Option { return func(j *JetStream) { j.maxAge = d } }

// WithDuplicateWindow sets the window of the publish dedupe by key.
func WithDuplicateWindow(d time.Duration) Option { return func(j *JetStream) { j.dupWindow = d } }

// DialJetStream connects to cfg.Servers (access_key/secret_key as NATS user
// and password). The connection reconnects forever in the background;
// publishes made while it is down fail and the relay retries them. cfg is
// as configs loaded it (defaults applied and checked there, once).
func DialJetStream(ctx context.Context, cfg configs.MQConfig, opts ...Option) (*JetStream, error) {
	if cfg.Kind != configs.MQKindNATS {
		return nil, fmt.Errorf("mq: kind %q is not JetStream", cfg.Kind)
	}
	j := &JetStream{log: slog.Default(), maxAge: DefaultStreamMaxAge, dupWindow: DefaultDuplicateWindow, ensured: map[string]bool{}}
	for _, o := range opts {
		o(j)
	}
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = max(100*time.Millisecond, time.Until(d))
	}
	nopts := []nats.Option{nats.Name("roomcell"), nats.Timeout(timeout), nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second), nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				j.log.Warn("mq disconnected", "component", "mq", "error", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			j.log.Info("mq reconnected", "component", "mq", "server", c.ConnectedUrlRedacted())
		}),
	}
	if cfg.AccessKey != "" {
		nopts = append(nopts, nats.UserInfo(cfg.AccessKey, cfg.SecretKey))
	}
	tc, err := cfg.TLS.Load()
	if err != nil {
		return nil, fmt.Errorf("notice.mq.tls: %w", err)
	}
	if tc != nil {
		// Secure makes TLS a requirement: a server that does not offer it
		// fails the connect (nats: secure connection not available).
		nopts = append(nopts, nats.Secure(tc))
	}
	nc, err := nats.Connect(strings.Join(cfg.Servers, ","), nopts...)
	if err != nil {
		// nats errors name the URL; a URL with a password is redacted by
		// the library, and user/password are options, not part of it.
		return nil, fmt.Errorf("mq: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("mq: jetstream: %w", err)
	}
	j.nc, j.js = nc, js
	j.log.Info("mq connected", "component", "mq", "kind", cfg.Kind, "server", nc.ConnectedUrlRedacted())
	return j, nil
}

// Close closes the connection; running consumers stop.
func (j *JetStream) Close() {
	j.nc.Close()
}

func subjectToken(s string) error {
	if s == "" || strings.ContainsAny(s, ".*> \t\r\n") {
		return fmt.Errorf("mq: %q is not a valid topic or tag (no '.', '*', '>' or spaces)", s)
	}
	return nil
}

// EnsureTopic creates or updates the stream of topic.
func (j *JetStream) EnsureTopic(ctx context.Context, topic string) error {
	if err := subjectToken(topic); err != nil {
		return err
	}
	j.mu.Lock()
	done := j.ensured[topic]
	j.mu.Unlock()
	if done {
		return nil
	}
	_, err := j.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       topic,
		Subjects:   []string{topic + ".>"},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     j.maxAge,
		Duplicates: j.dupWindow,
	})
	if err != nil {
		return fmt.Errorf("mq: ensure topic %s: %w", topic, err)
	}
	j.mu.Lock()
	j.ensured[topic] = true
	j.mu.Unlock()
	return nil
}

// DeleteTopic deletes the stream of topic and its consumers (tests, ops).
func (j *JetStream) DeleteTopic(ctx context.Context, topic string) error {
	j.mu.Lock()
	delete(j.ensured, topic)
	j.mu.Unlock()
	if err := j.js.DeleteStream(ctx, topic); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("mq: delete topic %s: %w", topic, err)
	}
	return nil
}

// Publish implements Publisher: the message goes to "<topic>.<tag>" with
// key as Nats-Msg-Id, and returns after the stream stored it.
func (j *JetStream) Publish(ctx context.Context, topic, tag, key string, data []byte) error {
	if err := subjectToken(tag); err != nil {
		return err
	}
	if err := j.EnsureTopic(ctx, topic); err != nil {
		return err
	}
	msg := &nats.Msg{Subject: topic + "." + tag, Data: data, Header: nats.Header{}}
	var opts []jetstream.PublishOpt
	if key != "" {
		opts = append(opts, jetstream.WithMsgID(key))
	}
	if _, err := j.js.PublishMsg(ctx, msg, opts...); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			err = errors.Join(ErrClosed, err)
		}
		if errors.Is(err, nats.ErrMaxPayload) {
			err = permanentError{err}
		}
		return fmt.Errorf("mq: publish %s to %s: %w", key, topic, err)
	}
	return nil
}

// PublishOrdered implements OrderedPublisher: a stream keeps the order of
// stored messages as a whole, so orderKey needs nothing more.
func (j *JetStream) PublishOrdered(ctx context.Context, topic, tag, key, _ string, data []byte) error {
	return j.Publish(ctx, topic, tag, key, data)
}

// permanentError is a publish error no retry can fix (the message is
// larger than the server accepts): Permanent() tells the relay's MQ
// fanout to park the row for the MQ channel.
type permanentError struct{ error }

func (e permanentError) Permanent() bool { return true }
func (e permanentError) Unwrap() error   { return e.error }

// Subscribe implements Subscriber: a durable pull consumer named s.Group
// on s.Topic's stream, consumed in this process until Stop. A message
// that failed is delivered again after RedeliverAfter, then twice that ...
// (capped at a minute); after 1+MaxRedeliver deliveries it is terminated.
func (j *JetStream) Subscribe(ctx context.Context, s Subscription) (Consumer, error) {
	if err := subjectToken(s.Group); err != nil {
		return nil, err
	}
	if s.Handler == nil {
		return nil, errors.New("mq: subscription without a handler")
	}
	if s.AckWait <= 0 {
		s.AckWait = 30 * time.Second
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
	if err := j.EnsureTopic(ctx, s.Topic); err != nil {
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       s.Group,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.AckWait,
		MaxDeliver:    s.MaxRedeliver + 1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: 1000,
	}
	for _, t := range s.Tags {
		if err := subjectToken(t); err != nil {
			return nil, err
		}
	}
	if len(s.Tags) == 1 {
		// One tag is filtered by the server. Several would need
		// FilterSubjects (nats-server 2.10+); they are filtered here
		// instead, so older servers work too.
		cfg.FilterSubject = s.Topic + "." + s.Tags[0]
	}
	cons, err := j.js.CreateOrUpdateConsumer(ctx, s.Topic, cfg)
	if err != nil {
		return nil, fmt.Errorf("mq: consumer %s on %s: %w", s.Group, s.Topic, err)
	}
	base, cancel := context.WithCancel(context.Background())
	log := j.log.With("component", "mq", "topic", s.Topic, "group", s.Group)
	cc, err := cons.Consume(func(msg jetstream.Msg) { handle(base, log, s, msg) },
		jetstream.PullMaxMessages(256),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			log.Warn("mq consume error", "error", err)
		}))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("mq: consume %s on %s: %w", s.Group, s.Topic, err)
	}
	log.Info("mq consumer started", "tags", s.Tags, "max_redeliver", s.MaxRedeliver)
	return &jsConsumer{cc: cc, cancel: cancel}, nil
}

func handle(base context.Context, log *slog.Logger, s Subscription, msg jetstream.Msg) {
	m := Message{Topic: s.Topic, Data: msg.Data(), Delivery: 1}
	if i := strings.LastIndexByte(msg.Subject(), '.'); i >= 0 {
		m.Tag = msg.Subject()[i+1:]
	}
	if h := msg.Headers(); h != nil {
		m.Key = h.Get(jetstream.MsgIDHeader)
	}
	if md, err := msg.Metadata(); err == nil {
		m.Delivery = int(md.NumDelivered)
	}
	if len(s.Tags) > 1 && !slices.Contains(s.Tags, m.Tag) {
		_ = msg.Ack() // not this group's business
		return
	}
	ctx, cancel := context.WithTimeout(base, s.HandlerTimeout)
	err := safeHandle(ctx, s.Handler, m)
	cancel()
	attrs := []any{"key", m.Key, "tag", m.Tag, "delivery", m.Delivery}
	var ackErr error
	switch {
	case err == nil:
		ackErr = msg.Ack()
	case errors.Is(err, ErrDrop):
		log.Warn("mq message dropped: it can never be processed", append(attrs, "error", err)...)
		ackErr = msg.TermWithReason("dropped by handler")
	case m.Delivery >= s.MaxRedeliver+1:
		log.Error("mq message failed its last delivery: dropped from the consumer (the MySQL scan may still find the fact)",
			append(attrs, "error", err)...)
		ackErr = msg.TermWithReason("max redeliveries")
	default:
		delay := RedeliverDelay(s.RedeliverAfter, m.Delivery)
		log.Warn("mq message failed: redelivering", append(attrs, "error", err, "after", delay)...)
		ackErr = msg.NakWithDelay(delay)
	}
	if ackErr != nil {
		// The broker redelivers after ack_wait; the handler is idempotent.
		log.Warn("mq ack failed", append(attrs, "error", ackErr)...)
	}
}

// safeHandle turns a handler panic into an error (the message is then
// redelivered) instead of killing the consumer's goroutine and the process.
func safeHandle(ctx context.Context, h Handler, m Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("mq: handler panic: %v\n%s", r, debug.Stack())
		}
	}()
	return h(ctx, m)
}

type jsConsumer struct {
	cc     jetstream.ConsumeContext
	cancel context.CancelFunc
	once   sync.Once
}

// Stop implements Consumer.
func (c *jsConsumer) Stop(ctx context.Context) error {
	c.once.Do(c.cc.Stop)
	select {
	case <-c.cc.Closed():
		c.cancel()
		return nil
	case <-ctx.Done():
		c.cancel() // the running handler's context ends
		return fmt.Errorf("mq: consumer stop: %w", ctx.Err())
	}
}
