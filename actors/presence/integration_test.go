package presence_test

// End-to-end runs of the directory with real room grains in a one-member
// cluster (one member is race-clean: a second one in the process races inside Proto.Actor) and the Redis
// directory: the stale worker, one user joining 20 rooms at once, and a
// Redis killed and restarted under load.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	grainkind "github.com/hyapp/roomcell/cluster/kind"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/hyapp/roomcell/actors/directory"
	"github.com/hyapp/roomcell/actors/presence"
	"github.com/hyapp/roomcell/actors/roomgrain"
	"github.com/hyapp/roomcell/actors/supervise"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/redis"
	"github.com/hyapp/roomcell/persistence/redis/redistest"
	"github.com/hyapp/roomcell/room"
)

type node struct {
	t      *testing.T
	c      *cluster.Cluster
	store  *memdb.Store
	dir    persistence.Directory
	client *roomgrain.Client
	worker *supervise.Poller[presence.ScanResult]
}

// startNode starts a one-member cluster whose room grains use dir, and the
// stale worker when pcfg.On(). Everything stops in t.Cleanup, worker
// first, then the cluster (rooms snapshot), as cmd/roomcell does.
func startNode(t *testing.T, dir persistence.Directory, pcfg configs.PresenceConfig) *node {
	t.Helper()
	if err := pcfg.Validate(); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, store: memdb.New(), dir: dir}
	hosted := directory.NewHosted()
	logger := slog.New(slog.DiscardHandler)
	kind := grainkind.New(roomgrain.Kind, roomgrain.GrainProps(roomgrain.Deps{
		Store: n.store, Gifts: roomgrain.FreeGifts(10), Config: configs.Default().Room, Logger: logger,
		Observers: []roomgrain.NewObserver{directory.New(directory.Deps{Directory: dir, Hosted: hosted, RefreshInterval: pcfg.RefreshInterval, Timeout: time.Second})},
	}))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	n.c = cluster.New(sys, cluster.Configure("presence-it", test.NewTestProvider(test.NewInMemAgent()), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(kind), cluster.WithRequestTimeout(3*time.Second)))
	n.c.StartMember()
	t.Cleanup(func() { n.c.Shutdown(true) })
	for n.c.MemberList.Length() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	n.client = &roomgrain.Client{Cluster: n.c, AttemptTimeout: 3 * time.Second}
	if pcfg.On() {
		sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
		if err != nil {
			t.Fatal(err)
		}
		n.worker, err = presence.Start(sup, presence.Deps{Directory: dir, Hosted: hosted, Rooms: n.client, Config: pcfg, NodeID: "it", Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := n.worker.Stop(10 * time.Second); err != nil {
				t.Error(err)
			}
		})
	}
	return n
}

func (n *node) do(rc *v1.RoomCommand) (*v1.CommandReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.client.Execute(ctx, rc)
}

func (n *node) must(rc *v1.RoomCommand) *v1.CommandReply {
	n.t.Helper()
	r, err := n.do(rc)
	if err != nil {
		n.t.Fatalf("%v: %v", rc, err)
	}
	return r
}

func (n *node) members(roomID string) []string {
	n.t.Helper()
	return n.must(&v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: roomID}}}).GetRoom().GetMembers()
}

func createRoom(roomID, owner string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
		CommandId: "create", AppCode: "app", RoomId: roomID, UserId: owner, Name: roomID}}}
}

func joinRoom(roomID, cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: roomID, UserId: user}}}
}

func heartbeat(roomID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_Heartbeat{Heartbeat: &v1.HeartbeatRequest{AppCode: "app", RoomId: roomID, UserId: user}}}
}

func sendGift(roomID, cmdID, from, to string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_SendGift{SendGift: &v1.SendGiftRequest{
		CommandId: cmdID, AppCode: "app", RoomId: roomID, UserId: from, ToUserId: to, GiftId: "rose", GiftCount: 1}}}
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A member who stops heartbeating is taken out by the stale worker within
// stale_after + scan_interval, through the room's own command path: the
// log and the outbox hold RoomUserLeft (heartbeat_timeout); a member who
// keeps heartbeating stays.
func TestStaleMemberLeavesThroughTheRoom(t *testing.T) {
	dir := redis.Open(redistest.Config(t, ""), redis.Options{})
	t.Cleanup(func() { _ = dir.Close() })
	pcfg := configs.WithDefaults(configs.PresenceConfig{StaleAfter: time.Second, ScanInterval: 250 * time.Millisecond, RefreshInterval: time.Minute})
	n := startNode(t, dir, pcfg)
	n.must(createRoom("r1", "owner"))
	n.must(joinRoom("r1", "j1", "bob"))
	stop := make(chan struct{})
	var beats sync.WaitGroup
	beats.Add(1)
	go func() { // the owner's client keeps heartbeating
		defer beats.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				_, _ = n.do(heartbeat("r1", "owner"))
			}
		}
	}()
	defer func() { close(stop); beats.Wait() }()

	n.must(heartbeat("r1", "bob"))
	last := time.Now() // bob's client goes quiet
	bound := pcfg.StaleAfter + pcfg.ScanInterval
	// Slack for scheduling on a shared two-core machine; a worker that
	// does not scan never takes bob out at all.
	const slack = 3 * time.Second
	waitUntil(t, bound+slack+time.Second, "bob taken out", func() bool { return !slices.Contains(n.members("r1"), "bob") })
	took := time.Since(last)
	t.Logf("bob left %s after his last heartbeat (stale_after + scan_interval = %s)", took.Round(time.Millisecond), bound)
	if took > bound+slack {
		t.Fatalf("bob left after %s, want within stale_after + scan_interval (%s) plus scheduling", took, bound)
	}
	if !slices.Contains(n.members("r1"), "owner") {
		t.Fatal("the heartbeating owner was taken out")
	}
	rows, err := n.store.ListOutbox(context.Background(), persistence.OutboxFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range rows {
		if r.Envelope.EventType != room.TypeRoomUserLeft {
			continue
		}
		var ev room.RoomUserLeft
		if err := json.Unmarshal(r.Envelope.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		if ev == (room.RoomUserLeft{UserID: "bob", Reason: room.ReasonHeartbeatTimeout}) && r.Status == persistence.OutboxPending {
			found = true
		}
	}
	if !found {
		t.Fatalf("no pending RoomUserLeft(bob, heartbeat_timeout) in the outbox: %+v", rows)
	}
	waitUntil(t, 3*time.Second, "bob's directory entry cleared", func() bool {
		_, err := dir.UserRoom(context.Background(), "app", "bob")
		return errors.Is(err, persistence.ErrNotFound)
	})
}

// One user joining 20 rooms at once ends up a member of exactly one, and
// the directory names that one.
func TestOneUserJoins20RoomsConcurrently(t *testing.T) {
	dir := redis.Open(redistest.Config(t, ""), redis.Options{})
	t.Cleanup(func() { _ = dir.Close() })
	off := false
	n := startNode(t, dir, configs.WithDefaults(configs.PresenceConfig{Enabled: &off, RefreshInterval: time.Minute}))
	const rooms = 20
	for i := range rooms {
		n.must(createRoom(fmt.Sprintf("r%02d", i), fmt.Sprintf("owner%02d", i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, rooms)
	for i := range rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := n.do(joinRoom(fmt.Sprintf("r%02d", i), "j", "bob")); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a join failed: %v", err)
	}
	var in []string
	waitUntil(t, 10*time.Second, "bob in exactly one room", func() bool {
		in = in[:0]
		for i := range rooms {
			if r := fmt.Sprintf("r%02d", i); slices.Contains(n.members(r), "bob") {
				in = append(in, r)
			}
		}
		return len(in) == 1
	})
	waitUntil(t, 5*time.Second, "directory agrees", func() bool {
		ur, err := dir.UserRoom(context.Background(), "app", "bob")
		return err == nil && ur.RoomID == in[0]
	})
	// The old rooms drop bob's presence in their directory workers, after
	// their leaves commit: wait for that like for the entry above.
	var mismatch string
	converged := func() bool {
		for i := range rooms {
			key := persistence.RoomKey{AppCode: "app", RoomID: fmt.Sprintf("r%02d", i)}
			ps, err := dir.StalePresence(context.Background(), key, 1<<62, 100)
			if err != nil {
				t.Fatal(err)
			}
			var users []string
			for _, p := range ps {
				users = append(users, p.UserID)
			}
			if slices.Contains(users, "bob") != (key.RoomID == in[0]) {
				mismatch = fmt.Sprintf("room %s presence %v: bob must be present only in %s", key.RoomID, users, in[0])
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(5 * time.Second)
	for !converged() {
		if time.Now().After(deadline) {
			t.Fatal(mismatch)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("bob stayed in %s", in[0])
}

// Redis is killed and restarted (empty) while users join, heartbeat and
// send gifts. No command fails; rule answers are allowed (a user moved out
// of a room by a switch gets "not a member" and would rejoin). When Redis
// is back the rooms' refresh rebuilds the directory: every user is in at
// most one room, and the directory's user entries, presence and listing
// match the rooms' state.
func TestRedisKilledAndRestartedUnderLoad(t *testing.T) {
	srv := redistest.StartServer(t)
	cfg := redistest.Config(t, srv.Addr)
	cfg.Timeout = 200 * time.Millisecond
	dir := redis.Open(cfg, redis.Options{})
	t.Cleanup(func() { _ = dir.Close() })
	off := false
	n := startNode(t, dir, configs.WithDefaults(configs.PresenceConfig{Enabled: &off, RefreshInterval: 300 * time.Millisecond}))
	const roomsN, usersN = 4, 12
	roomIDs := make([]string, roomsN)
	for i := range roomIDs {
		roomIDs[i] = fmt.Sprintf("r%d", i)
		n.must(createRoom(roomIDs[i], "owner-"+roomIDs[i]))
	}

	var down atomic.Bool
	var ok, okWhileDown, ruleAnswers atomic.Int64
	var failMu sync.Mutex
	var failures []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for u := range usersN {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%02d", u)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				r := roomIDs[(u+k/3)%roomsN] // move to the next room every third round
				for j, rc := range []*v1.RoomCommand{
					joinRoom(r, fmt.Sprintf("%s-j%d", user, k), user),
					heartbeat(r, user),
					sendGift(r, fmt.Sprintf("%s-g%d", user, k), user, "owner-"+r),
				} {
					_, err := n.do(rc)
					switch {
					case err == nil:
						ok.Add(1)
						if down.Load() {
							okWhileDown.Add(1)
						}
					case j > 0 && errors.Is(err, room.ErrNotMember):
						ruleAnswers.Add(1) // switched out by a concurrent refresh
					default:
						failMu.Lock()
						failures = append(failures, fmt.Errorf("%s %d: %w", user, j, err))
						failMu.Unlock()
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	time.Sleep(800 * time.Millisecond)
	srv.Kill()
	down.Store(true)
	time.Sleep(1500 * time.Millisecond)
	down.Store(false)
	srv.Restart()
	time.Sleep(800 * time.Millisecond)
	close(stop)
	wg.Wait()

	t.Logf("commands ok %d (while redis was down %d), not-a-member answers %d", ok.Load(), okWhileDown.Load(), ruleAnswers.Load())
	if len(failures) > 0 {
		t.Fatalf("%d commands failed, first: %v", len(failures), failures[0])
	}
	if okWhileDown.Load() == 0 {
		t.Fatal("no command completed while redis was down")
	}

	ctx := context.Background()
	waitUntil(t, 15*time.Second, "directory consistent with the rooms", func() bool {
		where := map[string][]string{}
		views := map[string]*v1.RoomView{}
		for _, r := range roomIDs {
			v := n.must(&v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: r}}}).GetRoom()
			views[r] = v
			for _, m := range v.GetMembers() {
				where[m] = append(where[m], r)
			}
		}
		for u := range usersN {
			user := fmt.Sprintf("u%02d", u)
			ur, err := dir.UserRoom(ctx, "app", user)
			switch len(where[user]) {
			case 0:
				if !errors.Is(err, persistence.ErrNotFound) {
					return false
				}
			case 1:
				if err != nil || ur.RoomID != where[user][0] {
					return false
				}
			default:
				return false // still in two rooms
			}
		}
		page, err := dir.ListRooms(ctx, "app", 0, 100)
		if err != nil || len(page.Rooms) != roomsN {
			return false
		}
		for _, e := range page.Rooms {
			v := views[e.RoomID]
			if v == nil || e.MemberCount != int64(len(v.GetMembers())) || e.Heat != v.GetHeat() {
				return false
			}
			ps, err := dir.StalePresence(ctx, persistence.RoomKey{AppCode: "app", RoomID: e.RoomID}, 1<<62, 1000)
			if err != nil || len(ps) != len(v.GetMembers()) {
				return false
			}
			for _, p := range ps {
				if !slices.Contains(v.GetMembers(), p.UserID) {
					return false
				}
			}
		}
		return true
	})
}
