package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// waitFor is long because the CI machine is shared; conditions normally
// hold within milliseconds.
const waitFor = 10 * time.Second

func newMemDB(t *testing.T) persistence.Store {
	s := memdb.New()
	t.Cleanup(func() { s.Close() })
	return s
}

// testConfig is a fast relay section: mods set fields, the rest take the
// loader's defaults.
func testConfig(mods ...func(*configs.OutboxWorkerConfig)) configs.OutboxWorkerConfig {
	c := configs.OutboxWorkerConfig{
		PollInterval:   20 * time.Millisecond,
		BatchSize:      100,
		PublishTimeout: 500 * time.Millisecond,
		RetryStrategy:  configs.RetryFixedInterval,
		LeaseTTL:       3 * time.Second,
	}
	for _, m := range mods {
		m(&c)
	}
	return configs.WithDefaults(c)
}

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(sys.Shutdown)
	return sys
}

func newSupervisor(t *testing.T, sys *actor.ActorSystem, name string) *supervise.Supervisor {
	t.Helper()
	sup, err := supervise.NewSupervisor(sys, name, actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sup.Stop(5 * time.Second) })
	return sup
}

// startRelay starts a relay under a fresh supervisor and stops it at the
// end of the test (before the store's cleanup closes the store).
func startRelay(t *testing.T, sys *actor.ActorSystem, deps Deps) *supervise.Poller[RunNowResult] {
	t.Helper()
	r, err := Start(newSupervisor(t, sys, "workers-"+deps.NodeID), deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(10 * time.Second); err != nil {
			t.Errorf("stop relay: %v", err)
		}
	})
	return r
}

// ---- events in the store ----

var clockBase = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

func payload(t *testing.T, ev room.Event) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func envelope(t *testing.T, id string, ev room.Event, createdAtMs int64) persistence.Envelope {
	return persistence.Envelope{
		EventID:     id,
		EventType:   ev.EventType(),
		AppCode:     "app",
		RoomID:      "room-" + id,
		RoomSeq:     1,
		CommandID:   "cmd-" + id,
		CreatedAtMs: createdAtMs,
		Payload:     payload(t, ev),
	}
}

// joined is the usual IM-bound event of the tests.
func joined(t *testing.T, id string, createdAtMs int64) persistence.Envelope {
	return envelope(t, id, room.RoomUserJoined{UserID: "u-" + id, JoinedAtMs: createdAtMs}, createdAtMs)
}

// insert writes each envelope as the only event of its own room's first
// command, the way the room grain's Append would.
func insert(t *testing.T, s persistence.Store, envs ...persistence.Envelope) {
	t.Helper()
	for _, e := range envs {
		err := s.Append(context.Background(), persistence.Append{Command: persistence.CommandRecord{
			AppCode: e.AppCode, RoomID: e.RoomID, Seq: e.RoomSeq, CommandID: e.CommandID,
			CommandType: "Test", Reply: []byte(`{}`), Events: []persistence.Envelope{e}, CreatedAtMs: e.CreatedAtMs,
		}})
		if err != nil {
			t.Fatalf("insert %s: %v", e.EventID, err)
		}
	}
}

// pendingJoins inserts n IM-bound events ev-000.. created 1 ms apart.
func pendingJoins(t *testing.T, s persistence.Store, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	envs := make([]persistence.Envelope, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
		envs[i] = joined(t, ids[i], clockBase+int64(i))
	}
	insert(t, s, envs...)
	return ids
}

func get(t *testing.T, s persistence.OutboxStore, id string) persistence.OutboxRow {
	t.Helper()
	row, err := s.GetOutbox(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return row
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func published(t *testing.T, s persistence.OutboxStore, id string) func() bool {
	return func() bool { return get(t, s, id).Status == persistence.OutboxPublished }
}

// ---- fakes ----

// fakePublisher records every call; fn decides the outcome (nil: success).
// Each call's event_id also goes to calls, the tests' probe channel.
type fakePublisher struct {
	mu    sync.Mutex
	count map[string]int
	order []string
	calls chan string
	fn    func(ctx context.Context, env persistence.Envelope, attempt int) error
}

func newPublisher(fn func(ctx context.Context, env persistence.Envelope, attempt int) error) *fakePublisher {
	return &fakePublisher{count: map[string]int{}, calls: make(chan string, 10000), fn: fn}
}

func (p *fakePublisher) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	p.mu.Lock()
	p.count[env.EventID]++
	attempt := p.count[env.EventID]
	p.order = append(p.order, env.EventID)
	p.mu.Unlock()
	p.calls <- env.EventID
	if p.fn == nil {
		return nil
	}
	return p.fn(ctx, env, attempt)
}

func (p *fakePublisher) attempts(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count[id]
}

func (p *fakePublisher) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.order)
}

func (p *fakePublisher) snapshot() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.count))
	for k, v := range p.count {
		m[k] = v
	}
	return m
}

// countingStore counts claims: one claim is one batch under
// fixed_interval.
type countingStore struct {
	persistence.Store
	claims atomic.Int64
}

func (s *countingStore) ClaimPendingOutbox(ctx context.Context, owner string, nowMs, leaseMs int64, limit int) ([]persistence.OutboxRow, error) {
	s.claims.Add(1)
	return s.Store.ClaimPendingOutbox(ctx, owner, nowMs, leaseMs, limit)
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.UnixMilli(clockBase + 60_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// ---- logs ----

type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// logSink is a slog.Handler that keeps every record.
type logSink struct {
	mu      *sync.Mutex
	records *[]logRecord
	attrs   []slog.Attr
}

func newLogSink() *logSink { return &logSink{mu: &sync.Mutex{}, records: &[]logRecord{}} }

func (h *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (h *logSink) WithGroup(string) slog.Handler            { return h }
func (h *logSink) WithAttrs(as []slog.Attr) slog.Handler {
	return &logSink{mu: h.mu, records: h.records, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *logSink) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	*h.records = append(*h.records, rec)
	h.mu.Unlock()
	return nil
}

func (h *logSink) all() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRecord{}, *h.records...)
}

// find returns the first record with msg prefix and the given attrs.
func (h *logSink) find(msgPrefix string, attrs map[string]string) (logRecord, bool) {
	for _, r := range h.all() {
		if len(r.Msg) < len(msgPrefix) || r.Msg[:len(msgPrefix)] != msgPrefix {
			continue
		}
		ok := true
		for k, v := range attrs {
			if r.Attrs[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return r, true
		}
	}
	return logRecord{}, false
}

// ---- probe actor ----

// probe is an actor that pushes every non-lifecycle message it gets into a
// channel; tests use it as the sender of requests to the relay.
func probe(t *testing.T, sys *actor.ActorSystem) (*actor.PID, chan any) {
	ch := make(chan any, 100)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
			return
		}
		ch <- c.Message()
	}))
	t.Cleanup(func() { sys.Root.Stop(pid) })
	return pid, ch
}

func expect[T any](t *testing.T, ch <-chan any, timeout time.Duration) T {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-ch:
			if v, ok := m.(T); ok {
				return v
			}
		case <-deadline:
			var zero T
			t.Fatalf("probe: no %T within %s", zero, timeout)
			return zero
		}
	}
}

func slogNew(h slog.Handler) *slog.Logger { return slog.New(h) }

func superviseLog(sys *actor.ActorSystem, h slog.Handler) func() {
	return supervise.LogEvents(sys, slog.New(h))
}

func TestMain(m *testing.M) {
	// Deps without a Logger use slog.Default: keep test output readable.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

func newMemDBB(b *testing.B) *memdb.Store {
	s := memdb.New()
	b.Cleanup(func() { s.Close() })
	return s
}

func newSystemB(b *testing.B) *actor.ActorSystem {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	b.Cleanup(sys.Shutdown)
	return sys
}

func newSupervisorB(b *testing.B, sys *actor.ActorSystem) *supervise.Supervisor {
	sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		b.Fatal(err)
	}
	return sup
}
