package relay_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/supervise"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// seedFixture is seed 000's chain on the production publisher path: a
// room grain whose publisher child sends through delivery/roomim (the
// Enqueuer, per-room queues and coalescing) on the real Tencent IM REST
// client, against the fake IM over loopback HTTP; the relay publishes
// through the same roomim publisher. Failures are the fake IM's.
type seedFixture struct {
	t     *testing.T
	store chaosStore
	fake  *imfake.Server
	pub   *roomim.Publisher
	sys   *actor.ActorSystem
	room  *actor.PID
	sup   *supervise.Supervisor
	cfg   configs.OutboxWorkerConfig
}

func newSeedFixture(t *testing.T, s chaosStore) *seedFixture {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	client, err := tencentim.New(fake.ClientConfig(), tencentim.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	pub := roomim.New(client, roomim.WithLogger(quiet))
	t.Cleanup(pub.Close)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	sup, err := supervise.NewWorkerSupervisor(sys, "workers", supervise.RestartPolicy{}, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	roomCfg := configs.Default().Room
	roomCfg.PublishTimeout = 500 * time.Millisecond
	props := roomgrain.GrainProps(roomgrain.Deps{Store: s, Publisher: pub, Config: roomCfg, Logger: quiet, NodeID: "n1"})
	pid := sys.Root.Spawn(props)
	sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: "seed/r1", Kind: roomgrain.Kind}})
	return &seedFixture{t: t, store: s, fake: fake, pub: pub, sys: sys, room: pid, sup: sup,
		cfg: configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 100 * time.Millisecond, BatchSize: 100, PublishTimeout: 500 * time.Millisecond,
			RetryStrategy: configs.RetryFixedInterval, LeaseTTL: 5 * time.Second})}
}

func (f *seedFixture) do(rc *v1.RoomCommand) *v1.CommandReply {
	f.t.Helper()
	res, err := f.sys.Root.RequestFuture(f.room, rc, 10*time.Second).Result()
	if err != nil {
		f.t.Fatal(err)
	}
	r := res.(*v1.RoomResponse)
	if r.GetError() != nil {
		f.t.Fatalf("command refused: %v", r.GetError())
	}
	return r.GetReply()
}

func (f *seedFixture) create() {
	f.do(&v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
		CommandId: "c1", AppCode: "seed", RoomId: "r1", UserId: "owner", Name: "seed"}}})
	f.waitRow("the room's first events published", func() bool {
		st, err := f.store.OutboxStats(context.Background())
		return err == nil && st.Pending == 0
	})
}

func (f *seedFixture) join(cmd, user string) *v1.CommandReply {
	return f.do(&v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
		CommandId: cmd, AppCode: "seed", RoomId: "r1", UserId: user}}})
}

func (f *seedFixture) row(id string) persistence.OutboxRow {
	f.t.Helper()
	r, err := f.store.GetOutbox(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *seedFixture) waitRow(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// imDown makes every group send fail with a transient Tencent error.
func (f *seedFixture) imDown() { f.fake.FailFraction(1, 20004, tencentim.APISendGroupMsg) }

// failedSyncJoin runs a join while IM is down and waits until its sync
// publish has failed and given the row back (pending, no lease).
func (f *seedFixture) failedSyncJoin(cmd, user string) string {
	f.t.Helper()
	f.imDown()
	r := f.join(cmd, user)
	id := r.EventIds[0]
	f.waitRow("the failed sync publish to give the row back", func() bool {
		row := f.row(id)
		return row.Status == persistence.OutboxPending && row.LockedBy == ""
	})
	return id
}

// startRelay starts the relay; its metrics tell what it (and not the
// room's own publisher) did.
func (f *seedFixture) startRelay() (*supervise.Poller[relay.RunNowResult], *relay.Metrics) {
	f.t.Helper()
	m, err := relay.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		f.t.Fatal(err)
	}
	r, err := relay.Start(f.sup, relay.Deps{Store: f.store, Publisher: f.pub, Config: f.cfg, NodeID: "n1", Logger: slog.New(slog.DiscardHandler), Metrics: m})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = r.Stop(10 * time.Second) })
	return r, m
}

// TestSeedRowsProductionPath runs seed 000's Acceptance Tests table on the
// production publisher path (room grain publisher child + relay, both
// through delivery/roomim and the real Tencent IM client, into the fake
// IM), on go-memdb and on MariaDB. The same rows also run with fake
// publishers (actors/roomgrain.TestSeedSyncPublishRows, TestRelay*); these
// prove the Enqueue path keeps them.
func TestSeedRowsProductionPath(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) chaosStore
	}{
		{"memdb", func(t *testing.T) chaosStore {
			s := memdb.New()
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"mariadb", func(t *testing.T) chaosStore {
			cfg, _ := mysqltest.NewDatabase(t)
			s, err := mysql.Open(context.Background(), cfg, mysql.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}
	rows := []struct {
		name string
		run  func(t *testing.T, f *seedFixture)
	}{
		{"同步IM失败后命令成功", func(t *testing.T, f *seedFixture) {
			f.create()
			f.imDown()
			r := f.join("c2", "bob")
			got := f.do(&v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "seed", RoomId: "r1"}}})
			if r.RoomSeq != 2 || got.RoomSeq != 2 || len(got.Room.Members) != 2 {
				t.Fatalf("room after a failed sync publish: seq %d/%d, %d members", r.RoomSeq, got.RoomSeq, len(got.Room.Members))
			}
		}},
		{"同步IM失败后outbox_pending", func(t *testing.T, f *seedFixture) {
			f.create()
			id := f.failedSyncJoin("c2", "bob")
			time.Sleep(50 * time.Millisecond) // a (wrong) mark would land now
			if row := f.row(id); row.Status != persistence.OutboxPending || row.RetryCount != 0 {
				t.Fatalf("row %+v, want pending with retry_count untouched by the sync failure", row)
			}
			if n := f.fake.EventIDCounts()[id]; n != 0 {
				t.Fatalf("IM accepted the event %d times while failing", n)
			}
		}},
		{"同步IM成功", func(t *testing.T, f *seedFixture) {
			f.create()
			id := f.join("c2", "bob").EventIds[0]
			f.waitRow("the sync mark", func() bool { return f.row(id).Status == persistence.OutboxPublished })
			pending, err := f.store.ListPendingOutbox(context.Background(), 100)
			if err != nil || len(pending) != 0 {
				t.Fatalf("%d rows still scanned by the worker (%v)", len(pending), err)
			}
			if n := f.fake.EventIDCounts()[id]; n != 1 {
				t.Fatalf("IM got the event %d times, want 1", n)
			}
		}},
		{"worker补投成功", func(t *testing.T, f *seedFixture) {
			f.create()
			id := f.failedSyncJoin("c2", "bob")
			f.fake.ResetFaults()
			_, m := f.startRelay()
			// The relay counts a success after its mark: wait for both.
			f.waitRow("the worker's publish", func() bool {
				return f.row(id).Status == persistence.OutboxPublished && counterValue(m.Success) >= 1
			})
			if n := counterValue(m.Success); n != 1 {
				t.Fatalf("the relay published %v rows, want this one", n)
			}
			if row := f.row(id); row.LastError != "" || row.RetryCount != 0 {
				t.Fatalf("row after the worker %+v", row)
			}
			if n := f.fake.EventIDCounts()[id]; n != 1 {
				t.Fatalf("IM got the event %d times, want the same event_id once", n)
			}
		}},
		{"worker补投失败/下一轮成功", func(t *testing.T, f *seedFixture) {
			f.create()
			id := f.failedSyncJoin("c2", "bob")
			_, m := f.startRelay()
			f.waitRow("a failed worker round", func() bool { return f.row(id).RetryCount >= 1 })
			row := f.row(id)
			if row.Status != persistence.OutboxPending || !strings.Contains(row.LastError, "20004") || counterValue(m.Failure) < 1 {
				t.Fatalf("row after a failed worker round %+v, want pending with last_error naming the IM code", row)
			}
			f.fake.ResetFaults()
			f.waitRow("the next round's publish", func() bool {
				return f.row(id).Status == persistence.OutboxPublished && counterValue(m.Success) >= 1
			})
			if n := f.fake.EventIDCounts()[id]; n != 1 || counterValue(m.Success) != 1 {
				t.Fatalf("IM got the event %d times, relay success %v; want 1 and 1", n, counterValue(m.Success))
			}
		}},
		{"worker_cancel", func(t *testing.T, f *seedFixture) {
			f.create()
			id := f.failedSyncJoin("c2", "bob")
			f.fake.ResetFaults()
			f.fake.Delay(2 * time.Second) // longer than publish_timeout
			r, _ := f.startRelay()
			time.Sleep(100 * time.Millisecond) // the batch is in flight
			start := time.Now()
			if err := r.Stop(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > f.cfg.PublishTimeout+2*time.Second {
				t.Fatalf("stop took %s, want it bounded by publish_timeout %s", took, f.cfg.PublishTimeout)
			}
			time.Sleep(2200 * time.Millisecond) // the fake finishes the abandoned call
			calls := f.fake.CallCount(tencentim.APISendGroupMsg)
			time.Sleep(500 * time.Millisecond)
			if n := f.fake.CallCount(tencentim.APISendGroupMsg); n != calls {
				t.Fatalf("%d sends after the stop", n-calls)
			}
			if row := f.row(id); row.Status != persistence.OutboxPending || row.LockedBy != "" {
				t.Fatalf("row %+v after a stop mid-publish, want pending without a lease (timed out, retried later)", row)
			}
		}},
		{"非IM事件", func(t *testing.T, f *seedFixture) {
			f.create()
			// A heat change as the room's next command would write it.
			payload, _ := json.Marshal(room.RoomHeatChanged{Heat: 7})
			env := persistence.Envelope{EventID: room.EventID("seed", "r9", 1, 0), EventType: room.TypeRoomHeatChanged, AppCode: "seed",
				RoomID: "r9", RoomSeq: 1, CommandID: "h1", CreatedAtMs: time.Now().UnixMilli(), Payload: payload}
			if err := f.store.Append(context.Background(), persistence.Append{Command: persistence.CommandRecord{AppCode: "seed", RoomID: "r9",
				Seq: 1, CommandID: "h1", CommandType: "Test", Reply: []byte(`{}`), CreatedAtMs: env.CreatedAtMs, Events: []persistence.Envelope{env}}}); err != nil {
				t.Fatal(err)
			}
			calls := f.fake.CallCount(tencentim.APISendGroupMsg)
			r, m := f.startRelay()
			f.waitRow("the no-op mark", func() bool {
				return f.row(env.EventID).Status == persistence.OutboxPublished && counterValue(m.Success) >= 1
			})
			if _, err := r.RunNow(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			if f.fake.CallCount(tencentim.APISendGroupMsg) != calls || counterValue(m.Success) != 1 {
				t.Fatal("a non-IM event was sent, or marked by someone else than the relay")
			}
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			for _, row := range rows {
				t.Run(row.name, func(t *testing.T) { row.run(t, newSeedFixture(t, st.open(t))) })
			}
		})
	}
}

// counterValue reads a counter's value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
