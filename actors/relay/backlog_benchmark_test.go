package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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

func benchBacklog(b *testing.B, events, rooms, relays int, tencentQuota, fixedClaim bool) {
	b.StopTimer()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, _ := mysqltest.NewDatabase(b)
	store, err := mysql.Open(ctx, cfg, mysql.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()

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
	rcfg := configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 50 * time.Millisecond, BatchSize: 500, PublishTimeout: 3 * time.Second,
		RetryStrategy: configs.RetryFixedInterval, LeaseTTL: 30 * time.Second})
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
	limit := time.Now().Add(5 * time.Minute)
	for {
		st, err := store.OutboxStats(ctx)
		if err == nil && st.Pending == 0 {
			break
		}
		if time.Now().After(limit) {
			b.Fatalf("backlog not drained in 5 minutes: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
