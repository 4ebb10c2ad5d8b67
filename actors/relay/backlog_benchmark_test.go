package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// BenchmarkRelayBacklogMariaDB is the relay throughput run: a backlog
// of pending room events on MariaDB drained by 1 or 2 relays through the
// real Tencent IM client over loopback HTTP into the fake IM. Run it once
// per case: go test ./actors/relay -run '^$' -bench BacklogMariaDB -benchtime 1x
// The quota=tencent case keeps Tencent's default limits (200 calls/s per
// API, 40 messages/s per group) to show what the quota, not our code,
// allows. claim=fixed keeps every claim at batch_size (hot_room_batch =
// batch_size, the relay before the hot-room claim), claim=grows is
// the default; with -count N the cases alternate, so both are measured in
// the same run.
func BenchmarkRelayBacklogMariaDB(b *testing.B) {
	for _, c := range []struct {
		name   string
		events int
		rooms  int
		relays int
		quota  bool
		fixed  bool
	}{
		{"events=100000/rooms=1000/relays=1/claim=fixed", 100_000, 1000, 1, false, true},
		{"events=100000/rooms=1000/relays=1/claim=grows", 100_000, 1000, 1, false, false},
		{"events=100000/rooms=1/relays=1/claim=fixed", 100_000, 1, 1, false, true},
		{"events=100000/rooms=1/relays=1/claim=grows", 100_000, 1, 1, false, false},
		{"events=100000/rooms=1000/relays=2/claim=grows", 100_000, 1000, 2, false, false},
		{"events=20000/rooms=1000/relays=1/quota=tencent", 20_000, 1000, 1, true, false},
		// One hot room at Tencent's 40 messages/s: the room's drain rate is
		// what one message carries, times 40 (the hot-room drain).
		{"events=20000/rooms=1/relays=1/quota=tencent", 20_000, 1, 1, true, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				benchBacklog(b, c.events, c.rooms, c.relays, c.quota, c.fixed)
			}
		})
	}
}

// seedBacklog opens a fresh MariaDB database holding events pending rows
// in rooms rooms (100 events per command, rooms interleaved).
func seedBacklog(b *testing.B, events, rooms int, quiet *slog.Logger) *mysql.Store {
	ctx := context.Background()
	cfg, _ := mysqltest.NewDatabase(b)
	store, err := mysql.Open(ctx, cfg, mysql.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })

	const perAppend = 100
	for n := 0; n < events; n += perAppend {
		r := (n / perAppend) % rooms
		seq := int64(n/(perAppend*rooms) + 1)
		rec := persistence.CommandRecord{AppCode: "bench", RoomID: fmt.Sprint("r", r), Seq: seq,
			CommandID: fmt.Sprintf("c%d", n), CommandType: room.CmdJoinRoom, CreatedAtMs: int64(n)}
		for i := range perAppend {
			payload, _ := json.Marshal(room.RoomUserJoined{UserID: fmt.Sprint("u", n+i), JoinedAtMs: int64(n)})
			rec.Events = append(rec.Events, persistence.Envelope{EventID: room.EventID("bench", rec.RoomID, seq, i),
				EventType: room.TypeRoomUserJoined, AppCode: "bench", RoomID: rec.RoomID, RoomSeq: seq,
				CommandID: rec.CommandID, CreatedAtMs: int64(n), Payload: payload})
		}
		if err := store.Append(ctx, persistence.Append{Command: rec}); err != nil {
			b.Fatal(err)
		}
	}
	return store
}

// waitDrained polls until no row is pending.
func waitDrained(b *testing.B, store persistence.OutboxStore) {
	ctx := context.Background()
	limit := time.Now().Add(5 * time.Minute)
	for {
		st, err := store.OutboxStats(ctx)
		if err == nil && st.Pending == 0 {
			return
		}
		if time.Now().After(limit) {
			b.Fatalf("backlog not drained in 5 minutes: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func benchConfig() configs.OutboxWorkerConfig {
	return configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 50 * time.Millisecond, BatchSize: 500, PublishTimeout: 3 * time.Second,
		RetryStrategy: configs.RetryFixedInterval, LeaseTTL: 30 * time.Second})
}

func benchBacklog(b *testing.B, events, rooms, relays int, tencentQuota, fixedClaim bool) {
	b.StopTimer()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := seedBacklog(b, events, rooms, quiet)

	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	imCfg := fake.ClientConfig()
	if !tencentQuota {
		imCfg.RatePerSecond, imCfg.GroupRatePerSecond = 1_000_000, 1_000_000
	}
	client, err := tencentim.New(imCfg, tencentim.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	pub := roomim.New(client, roomim.WithLogger(quiet))
	defer pub.Close()
	for r := range rooms {
		if err := pub.EnsureGroup(ctx, "bench", fmt.Sprint("r", r), "", ""); err != nil {
			b.Fatal(err)
		}
	}

	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	rcfg := benchConfig()
	if fixedClaim {
		rcfg.HotRoomBatch = rcfg.BatchSize
	}
	b.StartTimer()
	start := time.Now()
	var started []*supervise.Poller[RunNowResult]
	for i := range relays {
		sup, err := supervise.NewSupervisor(sys, fmt.Sprint("workers-", i), actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
		if err != nil {
			b.Fatal(err)
		}
		r, err := Start(sup, Deps{Store: store, Publisher: pub, Config: rcfg, NodeID: fmt.Sprint("n", i), Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		started = append(started, r)
	}
	waitDrained(b, store)
	elapsed := time.Since(start)
	b.StopTimer()
	for _, r := range started {
		_ = r.Stop(10 * time.Second)
	}
	msgs := fake.CallCount(tencentim.APISendGroupMsg)
	counts := fake.EventIDCounts()
	if len(counts) != events {
		b.Fatalf("fake IM holds %d distinct events, want %d", len(counts), events)
	}
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(events)/float64(max(msgs, 1)), "events/msg")
}

// BenchmarkRelayDrainMariaDB is the whole relay (the actor: claim, checks,
// send, mark) draining 100,000 pending rows in 1,000 rooms on MariaDB into
// a sink that accepts every event at once: the relay's own cost and the
// database's, without IM's. deploy/local/watermill-ratio.sh sets it beside
// Watermill's SQL forwarder on its queue schema.
func BenchmarkRelayDrainMariaDB(b *testing.B) {
	const events, rooms = 100_000, 1000
	for range b.N {
		b.StopTimer()
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		store := seedBacklog(b, events, rooms, quiet)
		sink := newNoopSink(events)
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
		sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start, dbStart := time.Now(), dbCPU(b)
		r, err := Start(sup, Deps{Store: store, Publisher: sink, Config: benchConfig(), NodeID: "n0", Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		// The sink says when the last event came, so the wait costs the
		// database nothing while the relay drains (a COUNT of the pending
		// rows every few milliseconds would); then the last marks.
		select {
		case <-sink.all:
		case <-time.After(5 * time.Minute):
			b.Fatal("backlog not sent in 5 minutes")
		}
		waitDrained(b, store)
		elapsed, dbUsed := time.Since(start), dbCPU(b)-dbStart
		b.StopTimer()
		_ = r.Stop(10 * time.Second)
		sys.Shutdown()
		if dbStart >= 0 {
			b.ReportMetric(float64(dbUsed.Microseconds())/events, "db-µs/row")
		}
		if err := sink.check(events); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(events)/elapsed.Seconds(), "rows/s")
	}
}

// dbCPU is the CPU time the database server process has used so far, read
// from /proc/<ROOMCELL_BENCH_DB_PID>/stat (deploy/local/watermill-ratio.sh
// sets it to the mariadbd serving the tests); -1 when it is not set.
func dbCPU(b *testing.B) time.Duration {
	pid := os.Getenv("ROOMCELL_BENCH_DB_PID")
	if pid == "" {
		return -1
	}
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		b.Fatalf("ROOMCELL_BENCH_DB_PID: %v", err)
	}
	// Fields after the command's closing parenthesis; utime and stime are
	// the 14th and 15th of the line, in clock ticks (100 a second).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// noopSink is an Enqueuer that accepts every event at once, recording
// how often each event came and whether a room's events came in order.
type noopSink struct {
	mu       sync.Mutex
	seen     map[string]int
	last     map[string][2]int64 // room -> (room_seq, index in its command) of its last event
	reorders int
	want     int           // distinct events expected
	all      chan struct{} // closed when want distinct events came
}

func newNoopSink(events int) *noopSink {
	return &noopSink{seen: map[string]int{}, last: map[string][2]int64{}, want: events, all: make(chan struct{})}
}

var closedNil = func() <-chan error { c := make(chan error, 1); c <- nil; close(c); return c }()

func (s *noopSink) Enqueue(ctx context.Context, env persistence.Envelope) <-chan error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[env.EventID]++
	if s.seen[env.EventID] == 1 && len(s.seen) == s.want {
		close(s.all)
	}
	// A room's order is (room_seq, the event's index in its command): the
	// seeded ids are room.EventID's, which end with the index.
	at := [2]int64{env.RoomSeq, eventIndex(env.EventID)}
	if prev, ok := s.last[env.RoomID]; ok && s.seen[env.EventID] == 1 && (prev[0] > at[0] || prev[0] == at[0] && prev[1] > at[1]) {
		s.reorders++
	}
	s.last[env.RoomID] = at
	return closedNil
}

// eventIndex is the index room.EventID ends an event id with.
func eventIndex(id string) int64 {
	n, _ := strconv.ParseInt(id[strings.LastIndexByte(id, ':')+1:], 10, 64)
	return n
}

func (s *noopSink) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	return <-s.Enqueue(ctx, env)
}

func (s *noopSink) check(events int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) != events {
		return fmt.Errorf("sink holds %d distinct events, want %d", len(s.seen), events)
	}
	if s.reorders > 0 {
		return fmt.Errorf("%d events reached the sink before an earlier event of their room", s.reorders)
	}
	return nil
}
