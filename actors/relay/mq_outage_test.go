package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/mq"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// privateNATS is a nats-server of this test alone (its own port and
// JetStream directory), so stopping it never touches the machine's shared
// server.
type privateNATS struct {
	port int
	dir  string
	cmd  *exec.Cmd
}

func startPrivateNATS(t *testing.T) *privateNATS {
	t.Helper()
	if _, err := exec.LookPath("nats-server"); err != nil {
		t.Fatalf("nats-server not installed: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	n := &privateNATS{port: port, dir: t.TempDir()}
	n.start(t)
	t.Cleanup(func() { n.stop(t) })
	return n
}

func (n *privateNATS) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *privateNATS) start(t *testing.T) {
	t.Helper()
	n.cmd = exec.Command("nats-server", "-a", "127.0.0.1", "-p", strconv.Itoa(n.port), "-js", "-sd", n.dir)
	n.cmd.Stdout, n.cmd.Stderr = io.Discard, io.Discard
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(n.port), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("private nats-server on %d did not come up", n.port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends this test's own server process (by its handle, nothing else).
func (n *privateNATS) stop(t *testing.T) {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
	n.cmd = nil
}

type mqOutageStore interface {
	persistence.Store
}

func TestMQAndIMIndependentMemDB(t *testing.T) {
	s := memdb.New(memdb.WithOutboxMQ())
	t.Cleanup(func() { _ = s.Close() })
	runMQAndIMIndependent(t, s)
}

func TestMQAndIMIndependentMariaDB(t *testing.T) {
	cfg, _ := mysqltest.NewDatabase(t)
	s, err := mysql.Open(context.Background(), cfg, mysql.WithLogger(slog.New(slog.DiscardHandler)), mysql.WithOutboxMQ(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	runMQAndIMIndependent(t, s)
}

// The MQ fanout's own progress under load, rooms writing events all along:
//   - NATS (a private server) stopped for 10 s: IM keeps flowing (its
//     pending backlog stays small while the MQ backlog grows), and after
//     NATS is back the fanout catches up: every event is on the topic.
//   - then the fake IM failing every group send for 5 s: the MQ fanout
//     keeps flowing (its backlog drains while IM's grows), and after IM
//     recovers every event reaches it.
//
// In the end every event reached IM exactly once (the fake's accepted
// messages per event_id, no message swallowed as a duplicate: an MQ outage
// never re-sends IM) and the topic holds every event.
func runMQAndIMIndependent(t *testing.T, s mqOutageStore) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	nats := startPrivateNATS(t)
	var mqCfg configs.MQConfig
	mqCfg.Enabled, mqCfg.Kind, mqCfg.Servers = true, configs.MQKindNATS, []string{nats.url()}
	js, err := mq.DialJetStream(ctx, mqCfg, mq.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(js.Close)
	const topic = "room_outbox_outage"

	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	imCfg := fake.ClientConfig()
	imCfg.RatePerSecond, imCfg.GroupRatePerSecond = 1_000_000, 1_000_000
	client, err := tencentim.New(imCfg, tencentim.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	pub := roomim.New(client, roomim.WithLogger(quiet))
	t.Cleanup(pub.Close)
	const rooms = 20
	for r := range rooms {
		if err := pub.EnsureGroup(ctx, "mqo", fmt.Sprint("r", r), "", ""); err != nil {
			t.Fatal(err)
		}
	}

	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	sup, err := supervise.NewWorkerSupervisor(sys, "workers", supervise.RestartPolicy{}, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	// publish_timeout is generous: a send the fake accepted after the
	// relay gave up would be sent again, a duplicate this test would
	// (wrongly) blame on the MQ outage.
	cfg := configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 50 * time.Millisecond, BatchSize: 100, PublishTimeout: 5 * time.Second,
		RetryStrategy: configs.RetryFixedInterval, LeaseTTL: 20 * time.Second})
	r, err := relay.Start(sup, relay.Deps{Store: s, Publisher: pub, Config: cfg, NodeID: "n1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(10 * time.Second) })
	f, err := relay.StartMQ(sup, relay.MQDeps{Store: s, MQ: js, Topic: topic, Config: cfg, NodeID: "n1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Stop(10 * time.Second) })

	// Load: one join per room every 20 ms or so, until stopped.
	var written atomic.Int64
	stopLoad := make(chan struct{})
	var load sync.WaitGroup
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() { close(stopLoad) })
		load.Wait()
	}
	t.Cleanup(stop) // before the store closes, even when the test fails
	load.Go(func() {
		seq := map[int]int64{}
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			default:
			}
			rm := i % rooms
			seq[rm]++
			id := fmt.Sprint("r", rm)
			payload, _ := json.Marshal(room.RoomUserJoined{UserID: fmt.Sprint("u", i), JoinedAtMs: time.Now().UnixMilli()})
			env := persistence.Envelope{EventID: room.EventID("mqo", id, seq[rm], 0), EventType: room.TypeRoomUserJoined,
				AppCode: "mqo", RoomID: id, RoomSeq: seq[rm], CommandID: fmt.Sprint("c", i), CreatedAtMs: time.Now().UnixMilli(), Payload: payload}
			rec := persistence.CommandRecord{AppCode: "mqo", RoomID: id, Seq: seq[rm], CommandID: env.CommandID,
				CommandType: room.CmdJoinRoom, CreatedAtMs: env.CreatedAtMs, Events: []persistence.Envelope{env}}
			if err := s.Append(ctx, persistence.Append{Command: rec}); err != nil {
				t.Errorf("append: %v", err)
				return
			}
			written.Add(1)
			time.Sleep(time.Millisecond)
		}
	})
	stats := func() persistence.OutboxStats {
		st, err := s.OutboxStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	time.Sleep(time.Second)

	// NATS down for 10 s. The thresholds are shares of what was written
	// meanwhile, so a slow machine (or -race) does not change the verdict.
	nats.stop(t)
	outage := time.Now()
	var maxIMPending int64
	imAtStop, writtenAtStop := len(fake.EventIDCounts()), written.Load()
	for time.Since(outage) < 10*time.Second {
		maxIMPending = max(maxIMPending, stats().Pending)
		time.Sleep(100 * time.Millisecond)
	}
	during := stats()
	imDuring, writtenDuring := int64(len(fake.EventIDCounts())-imAtStop), written.Load()-writtenAtStop
	nats.start(t)
	t.Logf("NATS outage: %d events written, %d reached IM during it, IM pending at most %d, MQ pending %d at its end",
		writtenDuring, imDuring, maxIMPending, during.MQPending)
	if writtenDuring < 100 || during.MQPending < writtenDuring*8/10 {
		t.Fatalf("MQ pending %d at the end of a 10 s NATS outage with %d events written: the outage did not hold the fanout back", during.MQPending, writtenDuring)
	}
	if imDuring < writtenDuring*8/10 || maxIMPending > max(200, writtenDuring/5) {
		t.Fatalf("IM during the NATS outage: %d of %d events delivered, pending up to %d: IM was held back by the MQ outage", imDuring, writtenDuring, maxIMPending)
	}

	// IM failing for 5 s: the fanout goes on.
	eventually(t, 60*time.Second, "the MQ fanout catching up after NATS is back", func() bool { return stats().MQPending < 100 })
	fake.FailFraction(1, 20004, tencentim.APISendGroupMsg)
	imDown, writtenAtIMDown := time.Now(), written.Load()
	var maxMQPending int64
	for time.Since(imDown) < 5*time.Second {
		maxMQPending = max(maxMQPending, stats().MQPending)
		time.Sleep(100 * time.Millisecond)
	}
	imFailing := stats()
	writtenDuring = written.Load() - writtenAtIMDown
	fake.ResetFaults()
	t.Logf("IM outage: %d events written, IM pending %d at its end, MQ pending at most %d", writtenDuring, imFailing.Pending, maxMQPending)
	if writtenDuring < 50 || imFailing.Pending < writtenDuring*8/10 {
		t.Fatalf("IM pending %d at the end of a 5 s IM outage with %d written: the outage did not hold IM back", imFailing.Pending, writtenDuring)
	}
	if maxMQPending > max(200, writtenDuring/5) {
		t.Fatalf("MQ pending up to %d during the IM outage (%d written): the fanout was held back by IM", maxMQPending, writtenDuring)
	}
	time.Sleep(time.Second)
	stop()

	total := written.Load()
	eventually(t, 120*time.Second, "both channels drained", func() bool {
		st := stats()
		return st.Pending == 0 && st.MQPending == 0 && st.Parked == 0
	})
	// IM: every event exactly once, no duplicate swallowed by Tencent's
	// dedupe (a re-send would be one).
	counts := fake.EventIDCounts()
	if int64(len(counts)) != total {
		t.Fatalf("IM holds %d distinct events, want %d", len(counts), total)
	}
	for id, n := range counts {
		if n != 1 {
			t.Fatalf("event %s reached IM %d times, want exactly 1", id, n)
		}
	}
	if d := fake.Duplicates(); d != 0 {
		t.Fatalf("IM saw %d duplicate sends", d)
	}
	// MQ: every event on the topic (stored once per key by the stream).
	var mu sync.Mutex
	keys := map[string]bool{}
	c, err := js.Subscribe(ctx, mq.Subscription{Topic: topic, Group: "outage_check", Handler: func(_ context.Context, m mq.Message) error {
		mu.Lock()
		keys[m.Key] = true
		mu.Unlock()
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	// The wait is for the backlog the outage left (~7,000 events) to reach
	// the topic: 20 s for the whole test alone under -race, 2.5x that in
	// make test's parallel packages, where 30 s ran out once.
	eventually(t, 90*time.Second, "every event on the topic", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return int64(len(keys)) == total
	})
	t.Logf("%d events: IM got each exactly once (%d group sends), the topic has all", total, fake.CallCount(tencentim.APISendGroupMsg))
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
