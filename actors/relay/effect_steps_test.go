package relay_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/hyapp/roomcell/actors/relay"
	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/delivery/trtc"
	"github.com/hyapp/roomcell/delivery/trtc/trtcfake"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// stepsNode is a process on the production path: a room grain whose
// publisher sends through delivery/roomim with the steps of kicks and
// closes kept in their outbox rows, against one fake IM (on a clock the
// test moves past Tencent's 5-minute dedupe window) and one fake TRTC
// that outlive it.
type stepsNode struct {
	sys  *actor.ActorSystem
	pub  *roomim.Publisher
	room *actor.PID
	once sync.Once
}

type stepsWorld struct {
	t      *testing.T
	store  chaosStore
	fake   *imfake.Server
	client *tencentim.Client
	tfake  *trtcfake.Server
	audio  *trtc.Client
	offset atomic.Int64 // ms added to the wall clock
}

func (w *stepsWorld) now() time.Time {
	return time.Now().Add(time.Duration(w.offset.Load()) * time.Millisecond)
}

func newStepsWorld(t *testing.T, store chaosStore) *stepsWorld {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	w := &stepsWorld{t: t, store: store}
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet), imfake.WithClock(w.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	w.fake = fake
	if w.client, err = tencentim.New(fake.ClientConfig(), tencentim.WithLogger(quiet)); err != nil {
		t.Fatal(err)
	}
	if w.tfake, err = trtcfake.Start("127.0.0.1:0", trtcfake.WithLogger(quiet)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.tfake.Close() })
	if w.audio, err = trtc.New(w.tfake.ClientConfig(), trtc.WithLogger(quiet)); err != nil {
		t.Fatal(err)
	}
	return w
}

// publisher is a fresh roomim publisher: nothing in its memory.
func (w *stepsWorld) publisher() *roomim.Publisher {
	return roomim.New(w.client, roomim.WithLogger(slog.New(slog.DiscardHandler)), roomim.WithAudio(w.audio), roomim.WithClock(w.now),
		roomim.WithEffectSteps(func(persistence.RoomKey) roomim.EffectSteps { return w.store }, time.Second))
}

// startNode starts a process hosting room steps/r1.
func (w *stepsWorld) startNode() *stepsNode {
	quiet := slog.New(slog.DiscardHandler)
	pub := w.publisher()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	roomCfg := configs.Default().Room
	roomCfg.PublishTimeout = 2 * time.Second
	pid := sys.Root.Spawn(roomgrain.GrainProps(roomgrain.Deps{Store: w.store, Publisher: pub, Config: roomCfg, Logger: quiet, NodeID: "n1"}))
	sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: "steps/r1", Kind: roomgrain.Kind}})
	n := &stepsNode{sys: sys, pub: pub, room: pid}
	w.t.Cleanup(n.die)
	return n
}

// die ends the process: its grain, its publisher and their memory.
func (n *stepsNode) die() {
	n.once.Do(func() {
		n.sys.Shutdown()
		n.pub.Close()
	})
}

func (w *stepsWorld) do(n *stepsNode, rc *v1.RoomCommand) *v1.CommandReply {
	w.t.Helper()
	res, err := n.sys.Root.RequestFuture(n.room, rc, 10*time.Second).Result()
	if err != nil {
		w.t.Fatal(err)
	}
	r := res.(*v1.RoomResponse)
	if r.GetError() != nil {
		w.t.Fatalf("command refused: %v", r.GetError())
	}
	return r.GetReply()
}

func (w *stepsWorld) waitFor(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *stepsWorld) row(id string) persistence.OutboxRow {
	w.t.Helper()
	r, err := w.store.GetOutbox(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// eventOf finds the command's event of type typ.
func (w *stepsWorld) eventOf(r *v1.CommandReply, typ string) string {
	w.t.Helper()
	for _, id := range r.EventIds {
		if w.row(id).Envelope.EventType == typ {
			return id
		}
	}
	w.t.Fatalf("no %s among the command's events %v", typ, r.EventIds)
	return ""
}

// shown counts the group messages carrying event id.
func (w *stepsWorld) shown(gid, id string) int {
	n := 0
	for _, m := range w.fake.GroupMessages(gid) {
		for _, e := range m.EventIDs {
			if e == id {
				n++
			}
		}
	}
	return n
}

// relayUntilDone runs relay batches through a fresh publisher (another
// process) until nothing is pending.
func (w *stepsWorld) relayUntilDone() {
	w.t.Helper()
	pub := w.publisher()
	defer pub.Close()
	cfg := configs.WithDefaults(configs.OutboxWorkerConfig{PollInterval: 100 * time.Millisecond, BatchSize: 100, PublishTimeout: 2 * time.Second,
		RetryStrategy: configs.RetryFixedInterval, LeaseTTL: 5 * time.Second})
	w.waitFor("the relay to publish every row", func() bool {
		if _, err := relay.ProcessBatch(context.Background(), relay.Deps{Store: w.store, Publisher: pub, Config: cfg, NodeID: "n2",
			Logger: slog.New(slog.DiscardHandler)}); err != nil {
			w.t.Fatal(err)
		}
		st, err := w.store.OutboxStats(context.Background())
		return err == nil && st.Pending == 0
	})
}

// TestEffectStepsSurviveTheProcess: on go-memdb and on MariaDB, the room's
// own publisher sends a kick (or a close): its message goes out, then TRTC
// fails; the row goes back to pending with the steps done recorded, and
// the process dies. Past Tencent's dedupe window a relay in another
// process, with a publisher that remembers nothing, retries the room's
// rows: the room gets the kick (close) message exactly once, the kicked
// user is banned in IM and out of the audio room (the audio room is
// dismissed once and the group destroyed), and the row ends published
// with every step recorded.
func TestEffectStepsSurviveTheProcess(t *testing.T) {
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
	gid := roomim.GroupID("steps", "r1")
	for _, st := range stores {
		t.Run(st.name+"/kick", func(t *testing.T) {
			w := newStepsWorld(t, st.open(t))
			node := w.startNode()
			w.do(node, &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
				CommandId: "c1", AppCode: "steps", RoomId: "r1", UserId: "owner", Name: "steps"}}})
			w.do(node, &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
				CommandId: "c2", AppCode: "steps", RoomId: "r1", UserId: "bad"}}})
			w.waitFor("the room's first events published", func() bool {
				s, err := w.store.OutboxStats(context.Background())
				return err == nil && s.Pending == 0
			})
			if err := w.fake.EnterGroup(gid, "bad"); err != nil {
				t.Fatal(err)
			}
			w.tfake.EnterRoom(gid, "bad")

			w.tfake.SetFailing("InternalError")
			r := w.do(node, &v1.RoomCommand{Command: &v1.RoomCommand_KickUser{KickUser: &v1.KickUserRequest{
				CommandId: "c3", AppCode: "steps", RoomId: "r1", UserId: "owner", TargetUserId: "bad", BanSeconds: 3600, Reason: "spam"}}})
			kick := w.eventOf(r, room.TypeRoomUserKicked)
			w.waitFor("the failed kick to go back to the outbox with its message and ban recorded", func() bool {
				row := w.row(kick)
				return row.Status == persistence.OutboxPending && row.LockedBy == "" && row.EffectsDone == 3
			})
			if n := w.shown(gid, kick); n != 1 {
				t.Fatalf("the kick message reached the room %d times before the retry, want once", n)
			}
			node.die()
			w.tfake.SetFailing("")
			w.offset.Add((5*time.Minute + time.Second).Milliseconds())

			w.relayUntilDone()
			if n := w.shown(gid, kick); n != 1 {
				t.Fatalf("the kick message reached the room %d times, want once", n)
			}
			if d := w.fake.Duplicates(); d != 0 {
				t.Fatalf("%d sends dropped as repeats: the retry sent the message again", d)
			}
			if n := w.fake.CallCount(tencentim.APIBanGroupMember); n != 1 {
				t.Fatalf("%d ban calls, want 1", n)
			}
			if _, banned := w.fake.BannedUntil(gid, "bad"); !banned || w.fake.InGroup(gid, "bad") {
				t.Fatal("the kicked user must be banned and out of the group")
			}
			if w.tfake.InRoom(gid, "bad") || len(w.tfake.Removed(gid)) != 1 {
				t.Fatalf("audio: in room %v, removed %v; want removed once", w.tfake.InRoom(gid, "bad"), w.tfake.Removed(gid))
			}
			if row := w.row(kick); row.Status != persistence.OutboxPublished || row.EffectsDone != 7 {
				t.Fatalf("kick row: status %s, steps %03b; want published, 111", row.Status, row.EffectsDone)
			}
		})
		t.Run(st.name+"/close", func(t *testing.T) {
			w := newStepsWorld(t, st.open(t))
			node := w.startNode()
			w.do(node, &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
				CommandId: "c1", AppCode: "steps", RoomId: "r1", UserId: "owner", Name: "steps"}}})
			w.waitFor("the room's first events published", func() bool {
				s, err := w.store.OutboxStats(context.Background())
				return err == nil && s.Pending == 0
			})
			w.tfake.EnterRoom(gid, "owner")

			w.tfake.SetFailing("InternalError")
			r := w.do(node, &v1.RoomCommand{Command: &v1.RoomCommand_CloseRoom{CloseRoom: &v1.CloseRoomRequest{
				CommandId: "c2", AppCode: "steps", RoomId: "r1", UserId: "owner"}}})
			closed := w.eventOf(r, room.TypeRoomClosed)
			w.waitFor("the failed close to go back to the outbox with its message recorded", func() bool {
				row := w.row(closed)
				return row.Status == persistence.OutboxPending && row.LockedBy == "" && row.EffectsDone == 1
			})
			node.die()
			w.tfake.SetFailing("")
			w.offset.Add((5*time.Minute + time.Second).Milliseconds())

			w.relayUntilDone()
			if n := w.shown(gid, closed); n != 1 {
				t.Fatalf("the close message reached the room %d times, want once", n)
			}
			if d := w.fake.Duplicates(); d != 0 {
				t.Fatalf("%d sends dropped as repeats: the retry sent the message again", d)
			}
			if n := w.tfake.Dismissed(gid); n != 1 || w.tfake.RoomExists(gid) {
				t.Fatalf("audio room dismissed %d times (exists %v), want once", n, w.tfake.RoomExists(gid))
			}
			if _, ok := w.fake.Group(gid); ok {
				t.Fatal("the closed room's group must be destroyed")
			}
			if row := w.row(closed); row.Status != persistence.OutboxPublished || row.EffectsDone != 7 {
				t.Fatalf("close row: status %s, steps %03b; want published, 111", row.Status, row.EffectsDone)
			}
		})
	}
}
