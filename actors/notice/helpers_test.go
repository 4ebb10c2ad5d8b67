package notice_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/notice"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// waitFor is long because the CI machine is shared; conditions normally
// hold within milliseconds.
const waitFor = 15 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// backends runs fn against go-memdb and MariaDB.
func backends(t *testing.T, fn func(t *testing.T, newStore func(t *testing.T) persistence.NoticeStore)) {
	t.Run("memdb", func(t *testing.T) {
		fn(t, func(t *testing.T) persistence.NoticeStore {
			s := memdb.NewNoticeStore()
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
	t.Run("mariadb", func(t *testing.T) {
		fn(t, func(t *testing.T) persistence.NoticeStore {
			cfg, _ := mysqltest.NewDatabase(t)
			s, err := mysql.OpenNoticeStore(context.Background(), cfg, mysql.WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sent is one SendNotice call.
type sent struct {
	AppCode, UserID, Ext, EventID string
	Data                          string
}

// fakePublisher records sends; fail decides each call's error.
type fakePublisher struct {
	mu    sync.Mutex
	calls []sent
	fail  func(eventID string, attempt int) error
	block chan struct{} // if set, sends wait for it (or their ctx)
}

func (p *fakePublisher) SendNotice(ctx context.Context, appCode, toUserID, ext string, data []byte, eventID string) error {
	if p.block != nil {
		select {
		case <-p.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.mu.Lock()
	attempt := 1
	for _, c := range p.calls {
		if c.EventID == eventID {
			attempt++
		}
	}
	p.calls = append(p.calls, sent{appCode, toUserID, ext, eventID, string(data)})
	fail := p.fail
	p.mu.Unlock()
	if fail != nil {
		return fail(eventID, attempt)
	}
	return nil
}

func (p *fakePublisher) sends() []sent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sent{}, p.calls...)
}

func (p *fakePublisher) count(eventID string) int {
	n := 0
	for _, c := range p.sends() {
		if c.EventID == eventID {
			n++
		}
	}
	return n
}

// listScanner hands out queued deliveries once; it is the test's owner
// outbox.
type listScanner struct {
	mu      sync.Mutex
	pending []persistence.NoticeDelivery
	next    int64
	resets  []persistence.NoticeCursor
}

func (s *listScanner) add(ds ...persistence.NoticeDelivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, ds...)
}

func (s *listScanner) Reset(from persistence.NoticeCursor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resets = append(s.resets, from)
}

func (s *listScanner) Scan(_ context.Context, _ int64, limit int) (notice.ScanResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(limit, len(s.pending))
	out := s.pending[:n]
	s.pending = s.pending[n:]
	s.next += int64(n)
	return notice.ScanResult{Deliveries: out, Safe: persistence.NoticeCursor{Num: s.next}, More: len(s.pending) > 0}, nil
}

func delivery(id, user string, createdMs int64) persistence.NoticeDelivery {
	return persistence.NoticeDelivery{
		NoticeKey:         persistence.NoticeKey{SourceName: persistence.SourceWalletOutbox, AppCode: "lalu", SourceEventID: id, Channel: persistence.ChannelIMC2C},
		EventType:         "WalletBalanceChanged",
		UserID:            user,
		Ext:               "wallet_notice",
		Payload:           json.RawMessage(fmt.Sprintf(`{"event_id":%q,"user_id":%q}`, id, user)),
		SourceCreatedAtMs: createdMs,
	}
}

func workerConfig() configs.NoticeWorkerConfig {
	return configs.WithDefaults(configs.NoticeWorkerConfig{
		Enabled:         true,
		PollInterval:    20 * time.Millisecond,
		BatchSize:       100,
		LockTTL:         3 * time.Second,
		MaxRetryCount:   3,
		MaxBackoff:      time.Second,
		SendTimeout:     time.Second,
		SendConcurrency: 4,
	})
}

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
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

func get(t *testing.T, s persistence.NoticeStore, id string) persistence.NoticeDelivery {
	t.Helper()
	d, err := s.Get(context.Background(), delivery(id, "", 0).NoticeKey)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return d
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
