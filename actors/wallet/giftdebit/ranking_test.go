package giftdebit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/wallet"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// The contribution ranking is money-exact: it counts what the wallet
// charged, so it is checked against the wallet's own ledger. This package
// joins the two (the wallet behind the room's GiftDebiter), so the test
// lives here.

// rankRoom hosts one room grain over a memdb room store and a real
// wallet on a memdb wallet store, at a clock the test moves.
type rankRoom struct {
	t      *testing.T
	sys    *actor.ActorSystem
	store  *snapshotGate
	ws     *memdb.WalletStore
	svc    *wallet.Service
	deps   roomgrain.Deps
	pid    *actor.PID
	nowMs  atomic.Int64
	cmdSeq int
}

// snapshotGate refuses snapshots once closed: a grain stopped then
// leaves none of its last commands in one, as a killed process would,
// and the next activation replays them from the log.
type snapshotGate struct {
	*memdb.Store
	closed atomic.Bool
}

func (s *snapshotGate) SaveSnapshot(ctx context.Context, snap persistence.Snapshot) error {
	if s.closed.Load() {
		return errors.New("snapshot refused: the process is being killed")
	}
	return s.Store.SaveSnapshot(ctx, snap)
}

// priced: the ranking counts prices, not heat, so the two differ here.
var priced = []configs.GiftConfig{
	{ID: "rose", Price: 10, Heat: 3},
	{ID: "heart", Price: 100, Heat: 250},
	{ID: "rocket", Price: 9900, Heat: 5000},
}

func newRankRoom(t *testing.T, zone string, start time.Time) *rankRoom {
	t.Helper()
	f := &rankRoom{t: t, store: &snapshotGate{Store: memdb.New()}, ws: memdb.NewWalletStore()}
	f.nowMs.Store(start.UnixMilli())
	var err error
	f.svc, err = wallet.NewService(f.ws, priced, configs.WalletConfig{DiamondPercent: 100})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	f.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	t.Cleanup(f.sys.Shutdown)
	cfg := configs.Default().Room
	cfg.Ranking.Zone = zone
	f.deps = roomgrain.Deps{Store: f.store, Gifts: New(f.svc), Config: cfg, Logger: logger,
		Clock: func() time.Time { return time.UnixMilli(f.nowMs.Load()) }}
	f.activate()
	return f
}

// activate starts a grain of the room, as the cluster's placement would.
func (f *rankRoom) activate() {
	f.pid = f.sys.Root.Spawn(roomgrain.GrainProps(f.deps))
	f.sys.Root.Send(f.pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: "app/r1", Kind: roomgrain.Kind}})
}

// kill stops the grain with no snapshot of its latest commands and
// starts another, which rebuilds the room from the store.
func (f *rankRoom) kill() {
	f.store.closed.Store(true)
	if err := f.sys.Root.StopFuture(f.pid).Wait(); err != nil {
		f.t.Fatal(err)
	}
	f.store.closed.Store(false)
	f.activate()
}

func (f *rankRoom) do(rc *v1.RoomCommand) (*v1.CommandReply, error) {
	f.t.Helper()
	res, err := f.sys.Root.RequestFuture(f.pid, rc, 5*time.Second).Result()
	if err != nil {
		f.t.Fatalf("grain did not answer: %v", err)
	}
	r, ok := res.(*v1.RoomResponse)
	if !ok {
		f.t.Fatalf("grain answered %T", res)
	}
	if r.Error != nil {
		return nil, errclass.FromWire(errclass.Code(r.Error.Code), r.Error.Class, r.Error.Message)
	}
	return r.Reply, nil
}

func (f *rankRoom) must(rc *v1.RoomCommand) *v1.CommandReply {
	f.t.Helper()
	r, err := f.do(rc)
	if err != nil {
		f.t.Fatalf("%v: %v", rc, err)
	}
	return r
}

func (f *rankRoom) id() string {
	f.cmdSeq++
	return fmt.Sprint("c", f.cmdSeq)
}

func (f *rankRoom) join(user string) {
	f.must(&v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{CommandId: f.id(), AppCode: "app", RoomId: "r1", UserId: user}}})
}

func (f *rankRoom) gift(from, to, giftID string, count int64) error {
	_, err := f.do(&v1.RoomCommand{Command: &v1.RoomCommand_SendGift{SendGift: &v1.SendGiftRequest{
		CommandId: f.id(), AppCode: "app", RoomId: "r1", UserId: from, ToUserId: to, GiftId: giftID, GiftCount: count}}})
	return err
}

func (f *rankRoom) credit(user string, amount int64) {
	f.t.Helper()
	if _, err := f.svc.Credit(context.Background(), wallet.CreditRequest{AppCode: "app", CommandID: "credit-" + user,
		UserID: user, AssetType: wallet.AssetCoin, Amount: amount}); err != nil {
		f.t.Fatal(err)
	}
}

// ranking walks the period's pages through the grain: every sender once,
// ranks 1, 2, 3... in order.
func (f *rankRoom) ranking(period string, pageSize int32) (map[string]int64, *v1.CommandReply) {
	f.t.Helper()
	got := map[string]int64{}
	tok := ""
	var last *v1.CommandReply
	var prev *v1.Contributor
	for {
		r := f.must(&v1.RoomCommand{Command: &v1.RoomCommand_ListContributors{ListContributors: &v1.ListContributorsRequest{
			AppCode: "app", RoomId: "r1", Period: period, PageSize: pageSize, PageToken: tok}}})
		for _, c := range r.Contributors {
			if _, twice := got[c.UserId]; twice {
				f.t.Fatalf("%s listed twice", c.UserId)
			}
			if int(c.Rank) != len(got)+1 || !c.Exact || prev != nil && (c.Value > prev.Value || c.Value == prev.Value && c.UserId < prev.UserId) {
				f.t.Fatalf("entry %v after %v at position %d", c, prev, len(got)+1)
			}
			got[c.UserId], prev = c.Value, c
		}
		last = r
		if tok = r.NextPageToken; tok == "" {
			return got, last
		}
	}
}

// debits is what the wallet's ledger says each sender paid for gifts:
// every COIN entry but the credit, a hold (available → frozen) and a
// refund nothing, a confirmed gift its price.
func (f *rankRoom) debits(users []string) map[string]int64 {
	f.t.Helper()
	out := map[string]int64{}
	for _, u := range users {
		es, err := f.ws.Ledger(context.Background(), persistence.AccountKey{AppCode: "app", UserID: u, AssetType: wallet.AssetCoin})
		if err != nil {
			f.t.Fatal(err)
		}
		for _, e := range es {
			if strings.HasPrefix(e.CommandID, "credit-") {
				continue
			}
			out[u] -= e.AvailableDelta + e.FrozenDelta
		}
		if out[u] == 0 {
			delete(out, u)
		}
	}
	return out
}

// TestRankingEqualsWalletLedgerAcrossAKill: 20,000 random gifts of 60
// senders (some run out of COIN and are refused), the grain killed
// without a final snapshot halfway; both periods' rankings equal, sender
// by sender, what the wallet's ledger debited them, and differ from the
// heat the gifts made.
func TestRankingEqualsWalletLedgerAcrossAKill(t *testing.T) {
	gifts := 20_000
	if testing.Short() {
		gifts = 2_000
	}
	f := newRankRoom(t, "", time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	f.must(&v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{CommandId: f.id(), AppCode: "app", RoomId: "r1", UserId: "owner", Name: "ranked"}}})
	var users []string
	for i := range 60 {
		u := fmt.Sprintf("u%02d", i)
		users = append(users, u)
		f.join(u)
		// A third can afford a few gifts only: their refusals must count
		// for nothing.
		amount := int64(5_000_000)
		if i%3 == 0 {
			amount = 2_000
		}
		f.credit(u, amount)
	}
	r := rand.New(rand.NewPCG(7, 43))
	refused, heat := 0, map[string]int64{}
	for i := range gifts {
		if i == gifts/2 {
			head := f.must(&v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}}).RoomSeq
			f.kill()
			// The new grain replayed the log's last commands: none of
			// them were in a snapshot.
			if snap, err := f.store.LoadSnapshot(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "r1"}); err != nil || snap.Seq >= head {
				t.Fatalf("snapshot at seq %d (err %v), head %d: the kill left nothing to replay", snap.Seq, err, head)
			}
		}
		f.nowMs.Add(1)
		k := r.IntN(len(users))
		from, to := users[k], users[(k+1+r.IntN(len(users)-1))%len(users)]
		g := priced[0] // roses mostly, hearts often, now and then a rocket
		if k := r.IntN(100); k >= 98 {
			g = priced[2]
		} else if k >= 70 {
			g = priced[1]
		}
		count := 1 + r.Int64N(3)
		err := f.gift(from, to, g.ID, count)
		switch {
		case err == nil:
			heat[from] += g.Heat * count
		case errors.Is(err, errclass.Precondition):
			refused++
		default:
			t.Fatalf("gift %d: %v", i, err)
		}
	}
	if refused == 0 {
		t.Fatal("no gift was refused: the poor senders never ran out")
	}
	want := f.debits(users)
	for _, period := range []string{room.PeriodLifecycle, room.PeriodDay} {
		got, last := f.ranking(period, 7)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s ranking\n %v\nthe ledger's debits\n %v", period, got, want)
		}
		if last.ContributorsFloor != 0 {
			t.Fatalf("%s floor %d with %d senders", period, last.ContributorsFloor, len(got))
		}
	}
	if fmt.Sprint(heat) == fmt.Sprint(want) {
		t.Fatal("heat and price agree: the test cannot tell which the ranking counts")
	}
	t.Logf("%d gifts, %d refused, %d senders ranked", gifts, refused, len(want))
}

// TestRankingDayFollowsTheConfiguredZone: in Asia/Shanghai a day ends at
// 16:00 UTC. A gift at 15:59:59.999 UTC counts for the 7th, one at 16:00
// for the 8th: the day ranking read after midnight there shows the
// second only, the lifecycle both; read before, the first.
func TestRankingDayFollowsTheConfiguredZone(t *testing.T) {
	end := time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)
	f := newRankRoom(t, "Asia/Shanghai", end.Add(-time.Hour))
	f.must(&v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{CommandId: f.id(), AppCode: "app", RoomId: "r1", UserId: "owner", Name: "ranked"}}})
	for _, u := range []string{"alice", "bob"} {
		f.join(u)
		f.credit(u, 1_000)
	}
	f.nowMs.Store(end.UnixMilli() - 1)
	if err := f.gift("alice", "bob", "heart", 2); err != nil {
		t.Fatal(err)
	}
	day, r := f.ranking(room.PeriodDay, 10)
	if fmt.Sprint(day) != "map[alice:200]" || r.ContributorsDay != "2026-12-07" {
		t.Fatalf("before midnight in Shanghai: day %s ranking %v", r.ContributorsDay, day)
	}
	f.nowMs.Store(end.UnixMilli())
	if day, r := f.ranking(room.PeriodDay, 10); len(day) != 0 || r.ContributorsDay != "2026-12-08" {
		t.Fatalf("at midnight in Shanghai, before a gift: day %s ranking %v", r.ContributorsDay, day)
	}
	if err := f.gift("bob", "alice", "rose", 3); err != nil {
		t.Fatal(err)
	}
	if day, r := f.ranking(room.PeriodDay, 10); fmt.Sprint(day) != "map[bob:30]" || r.ContributorsDay != "2026-12-08" {
		t.Fatalf("after midnight in Shanghai: day %s ranking %v", r.ContributorsDay, day)
	}
	if life, _ := f.ranking(room.PeriodLifecycle, 10); fmt.Sprint(life) != "map[alice:200 bob:30]" {
		t.Fatalf("lifecycle %v", life)
	}
	// A restarted grain reads the days from its log, not its clock.
	f.kill()
	if day, _ := f.ranking(room.PeriodDay, 10); fmt.Sprint(day) != "map[bob:30]" {
		t.Fatalf("after a restart: day ranking %v", day)
	}
}
