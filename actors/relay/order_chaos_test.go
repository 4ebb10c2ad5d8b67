package relay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/supervise"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/internal/logtest"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// chaosStore is the room grains' and the relays' view of one backend.
type chaosStore interface {
	persistence.Store
	roomgrain.Store
}

// The randomized order test, on go-memdb and on MariaDB: 200 rooms
// whose grains publish their own events on node A, two relays on nodes A
// and B (each node with its own Tencent IM client and its own per-group
// rate limiter), the fake IM failing 30% of sends and holding 10% past
// every publish timeout (the message is accepted, the caller gives up),
// and both relays stopped and restarted mid-run. After the drain, per
// room, the events IM accepted (deduplicated by event_id) are exactly the
// room's IM events in strictly increasing (room_seq, index) order; no
// group got more than 40 messages in any 1 s window; no row is pending.
func TestRoomOrderUnderChaosMemDB(t *testing.T) {
	runOrderChaos(t, memdb.New())
}

func TestRoomOrderUnderChaosMariaDB(t *testing.T) {
	cfg, _ := mysqltest.NewDatabase(t)
	s, err := mysql.Open(context.Background(), cfg, mysql.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	runOrderChaos(t, s)
}

type chaosNode struct {
	sys  *actor.ActorSystem
	sup  *supervise.Supervisor
	pub  *roomim.Publisher
	deps relay.Deps
	r    *supervise.Poller[relay.RunNowResult]
}

var chaosLog = &logtest.Buffer{}

func newChaosNode(t *testing.T, name string, fake *imfake.Server, s chaosStore) *chaosNode {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(chaosLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	client, err := tencentim.New(fake.ClientConfig(), tencentim.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	pub := roomim.New(client, roomim.WithLogger(quiet))
	t.Cleanup(pub.Close)
	sup, err := supervise.NewWorkerSupervisor(sys, "workers", supervise.RestartPolicy{}, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	n := &chaosNode{sys: sys, sup: sup, pub: pub, deps: relay.Deps{Store: s, Publisher: pub, NodeID: name, Logger: quiet,
		Config: configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 50 * time.Millisecond, BatchSize: 40,
			PublishTimeout: 300 * time.Millisecond, LeaseTTL: 3 * time.Second, RetryStrategy: configs.RetryFixedInterval})}}
	n.start(t)
	t.Cleanup(func() { n.stop(t) })
	return n
}

func (n *chaosNode) start(t *testing.T) {
	t.Helper()
	r, err := relay.Start(n.sup, n.deps)
	if err != nil {
		t.Fatal(err)
	}
	n.r = r
}

func (n *chaosNode) stop(t *testing.T) {
	if n.r == nil {
		return
	}
	if err := n.r.Stop(10 * time.Second); err != nil {
		t.Errorf("stop relay %s: %v", n.deps.NodeID, err)
	}
	n.r = nil
}

func runOrderChaos(t *testing.T, s chaosStore) {
	chaosLog = &logtest.Buffer{} // a failure prints the failing room's lines of this run
	t.Cleanup(func() { s.Close() })
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	a := newChaosNode(t, "node-a", fake, s)
	b := newChaosNode(t, "node-b", fake, s)

	roomCfg := configs.Default().Room
	roomCfg.PublishTimeout = 300 * time.Millisecond
	grainStore := &ackLostStore{chaosStore: s}
	props := roomgrain.GrainProps(roomgrain.Deps{Store: grainStore, Publisher: a.pub, Config: roomCfg, Logger: slog.New(slog.NewTextHandler(chaosLog, &slog.HandlerOptions{Level: slog.LevelDebug})), NodeID: "node-a"})

	const rooms, commands = 200, 8
	pids := make([]*actor.PID, rooms)
	for i := range rooms {
		pids[i] = a.sys.Root.Spawn(props)
		a.sys.Root.Send(pids[i], &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: fmt.Sprintf("chaos/r%d", i), Kind: roomgrain.Kind}})
	}
	// Rooms are created while IM is healthy (their groups exist); the
	// faults start with the traffic.
	do := func(i int, rc *v1.RoomCommand) error {
		res, err := a.sys.Root.RequestFuture(pids[i], rc, 10*time.Second).Result()
		if err != nil {
			return err
		}
		r, ok := res.(*v1.RoomResponse)
		if !ok {
			return fmt.Errorf("grain answered %T", res)
		}
		if r.GetError() != nil {
			return errors.New(r.GetError().GetMessage())
		}
		return nil
	}
	for i := range rooms {
		if err := do(i, &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
			CommandId: "create", AppCode: "chaos", RoomId: fmt.Sprint("r", i), UserId: "owner", Name: "chaos"}}}); err != nil {
			t.Fatalf("create room %d: %v", i, err)
		}
	}
	fake.FailFraction(0.3, 20004, tencentim.APISendGroupMsg)
	grainStore.every.Store(ackLostEvery)
	fake.DelayFraction(0.1, time.Second)

	var wg sync.WaitGroup
	for i := range rooms {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			for c := range commands {
				user := fmt.Sprint("u", rng.IntN(4))
				var rc *v1.RoomCommand
				id := fmt.Sprint("c", c)
				if c%2 == 0 {
					rc = &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
						CommandId: id, AppCode: "chaos", RoomId: fmt.Sprint("r", i), UserId: user}}}
				} else {
					rc = &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
						CommandId: id, AppCode: "chaos", RoomId: fmt.Sprint("r", i), UserId: user}}}
				}
				// A rule rejection (leaving a room one is not in) is
				// fine: it writes nothing.
				_ = do(i, rc)
				time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
			}
		})
	}
	// Kill and restart both relays while the traffic runs.
	time.Sleep(150 * time.Millisecond)
	b.stop(t)
	time.Sleep(100 * time.Millisecond)
	b.start(t)
	time.Sleep(100 * time.Millisecond)
	a.stop(t)
	time.Sleep(100 * time.Millisecond)
	a.start(t)
	wg.Wait()

	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := s.OutboxStats(context.Background())
		if err == nil && st.Pending == 0 && st.Parked == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox not drained: %+v %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	rows, err := s.ListOutbox(context.Background(), persistence.OutboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{} // group → IM event ids in (seq, index) order
	for _, r := range rows {
		if r.Status != persistence.OutboxPublished {
			t.Fatalf("row %s is %s after the drain", r.Envelope.EventID, r.Status)
		}
		if room.IsIMEvent(r.Envelope.EventType) {
			g := roomim.GroupID(r.Envelope.AppCode, r.Envelope.RoomID)
			want[g] = append(want[g], r.Envelope.EventID)
		}
	}
	got := map[string][]string{}
	seen := map[string]bool{}
	perGroup := map[string][]time.Time{}
	for _, m := range fake.Messages() {
		if m.Kind != "group" {
			continue
		}
		perGroup[m.GroupID] = append(perGroup[m.GroupID], m.At)
		for _, id := range m.EventIDs {
			if !seen[id] {
				seen[id] = true
				got[m.GroupID] = append(got[m.GroupID], id)
			}
		}
	}
	if len(want) != rooms {
		t.Fatalf("%d rooms with IM events, want %d", len(want), rooms)
	}
	total := 0
	for g, ids := range want {
		slices.SortFunc(ids, func(x, y string) int { return compareEventIDs(t, x, y) })
		total += len(ids)
		if !slices.Equal(got[g], ids) {
			room := strings.TrimPrefix(g, "chaos_")
			lines := strings.Split(chaosLog.String(), "\n")
			for _, l := range lines {
				if strings.Contains(l, "chaos:"+room+":") || strings.Contains(l, "room_id="+room+" ") {
					t.Log(l)
				}
			}
			t.Fatalf("group %s: IM got %v, want the room's events in order %v", g, got[g], ids)
		}
		for i := 1; i < len(got[g]); i++ {
			if compareEventIDs(t, got[g][i-1], got[g][i]) >= 0 {
				t.Fatalf("group %s: %s after %s", g, got[g][i], got[g][i-1])
			}
		}
	}
	for g, at := range perGroup {
		for i := range at {
			j := i
			for j < len(at) && at[j].Sub(at[i]) < time.Second {
				j++
			}
			if j-i > 40 {
				t.Fatalf("group %s got %d messages within 1s", g, j-i)
			}
		}
	}
	if grainStore.lost.Load() == 0 {
		t.Fatal("no append lost its acknowledgement: the unknown-outcome path was not exercised")
	}
	t.Logf("%d IM events in %d rooms delivered in order; %d group messages in all; %d appends committed with a lost ack",
		total, rooms, len(fake.Messages()), grainStore.lost.Load())
}

// ackLostEvery: one append in this many commits and then reports an error,
// as a commit whose acknowledgement was lost (a slow MariaDB under load
// does this past the room's store_timeout). The room then holds rows it
// never handed to its publisher, the interleaving behind this test's
// rare failure on MariaDB before the publisher's catch-up stopped
// overriding the grain's order break.
const ackLostEvery = 23

// ackLostStore is the room grains' store with lost commit acknowledgements.
type ackLostStore struct {
	chaosStore
	every atomic.Int64 // 0: off (while the rooms are created)
	n     atomic.Int64
	lost  atomic.Int64
}

func (s *ackLostStore) Append(ctx context.Context, a persistence.Append) error {
	if err := s.chaosStore.Append(ctx, a); err != nil {
		return err
	}
	if e := s.every.Load(); e > 0 && s.n.Add(1)%e == 0 {
		s.lost.Add(1)
		return fmt.Errorf("commit acknowledgement lost: %w", context.DeadlineExceeded)
	}
	return nil
}

// compareEventIDs orders "<app>:<room>:<seq>:<index>" ids numerically.
func compareEventIDs(t *testing.T, x, y string) int {
	px, py := strings.Split(x, ":"), strings.Split(y, ":")
	if len(px) != 4 || len(py) != 4 {
		t.Fatalf("unexpected event ids %q %q", x, y)
	}
	for i := 2; i < 4; i++ {
		a, _ := strconv.Atoi(px[i])
		b, _ := strconv.Atoi(py[i])
		if a != b {
			return a - b
		}
	}
	return 0
}
