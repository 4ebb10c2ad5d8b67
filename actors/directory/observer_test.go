package directory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyapp/roomcell/actors/roomgrain"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// pidRooms is a Commander over grains activated by the fixture: the
// cluster's job, without a cluster.
type pidRooms struct {
	mu   sync.Mutex
	sys  *actor.ActorSystem
	pids map[string]*actor.PID
}

func (r *pidRooms) Execute(ctx context.Context, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	app, roomID := room.KeyOf(rc)
	r.mu.Lock()
	pid := r.pids[app+"/"+roomID]
	r.mu.Unlock()
	if pid == nil {
		return nil, fmt.Errorf("%w: no grain for %s/%s", errclass.Unavailable, app, roomID)
	}
	res, err := r.sys.Root.RequestFuture(pid, rc, 5*time.Second).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errclass.Unavailable, err)
	}
	return replyOf(res)
}

// switchable is a Directory that fails every call while down is set, and
// can hold one room's SetUserRoom back until released.
type switchable struct {
	Directory
	down    atomic.Bool
	updates atomic.Int64 // UpdateRoom calls

	// jitter, when set, delays every user → room write by up to that
	// long, as a remote directory's round trip would: it widens the
	// windows in which two rooms' directory work interleaves.
	jitter time.Duration

	holdMu   sync.Mutex
	holdRoom string
	held     chan struct{} // closed when the held call arrives
	release  chan struct{}
}

// hold makes the next SetUserRoom for room wait for the returned release.
func (s *switchable) hold(roomID string) (arrived <-chan struct{}, release func()) {
	s.holdMu.Lock()
	defer s.holdMu.Unlock()
	s.holdRoom, s.held, s.release = roomID, make(chan struct{}), make(chan struct{})
	return s.held, func() { close(s.release) }
}

func (s *switchable) sleep() {
	if s.jitter > 0 {
		time.Sleep(rand.N(s.jitter))
	}
}

var errDirDown = fmt.Errorf("directory: %w", persistence.ErrUnavailable)

func (s *switchable) Heartbeat(ctx context.Context, k persistence.RoomKey, u string, now int64) error {
	if s.down.Load() {
		return errDirDown
	}
	return s.Directory.Heartbeat(ctx, k, u, now)
}

func (s *switchable) SetUserRoom(ctx context.Context, k persistence.RoomKey, u string, at int64) (persistence.UserRoom, error) {
	if s.down.Load() {
		return persistence.UserRoom{}, errDirDown
	}
	s.holdMu.Lock()
	held, release := s.held, s.release
	if k.RoomID != s.holdRoom {
		held = nil
	} else {
		s.holdRoom = ""
	}
	s.holdMu.Unlock()
	if held != nil {
		close(held)
		<-release
	}
	s.sleep()
	return s.Directory.SetUserRoom(ctx, k, u, at)
}

func (s *switchable) ClaimUserRoom(ctx context.Context, k persistence.RoomKey, u string, at int64) (persistence.Claim, error) {
	if s.down.Load() {
		return persistence.Claim{}, errDirDown
	}
	s.sleep()
	return s.Directory.ClaimUserRoom(ctx, k, u, at)
}

func (s *switchable) ClearUserRoom(ctx context.Context, k persistence.RoomKey, u string) error {
	if s.down.Load() {
		return errDirDown
	}
	return s.Directory.ClearUserRoom(ctx, k, u)
}

func (s *switchable) UserRoom(ctx context.Context, app, u string) (persistence.UserRoom, error) {
	if s.down.Load() {
		return persistence.UserRoom{}, errDirDown
	}
	return s.Directory.UserRoom(ctx, app, u)
}

func (s *switchable) UpdateRoom(ctx context.Context, e persistence.RoomEntry) (persistence.RankChange, error) {
	s.updates.Add(1)
	if s.down.Load() {
		return persistence.RankChange{}, errDirDown
	}
	return s.Directory.UpdateRoom(ctx, e)
}

func (s *switchable) RemoveRoom(ctx context.Context, k persistence.RoomKey) error {
	if s.down.Load() {
		return errDirDown
	}
	return s.Directory.RemoveRoom(ctx, k)
}

func (s *switchable) SyncRoom(ctx context.Context, rs persistence.RoomSync) (persistence.RankChange, []persistence.Claim, error) {
	if s.down.Load() {
		return persistence.RankChange{}, nil, errDirDown
	}
	return s.Directory.SyncRoom(ctx, rs)
}

// dirFixture hosts room grains with the directory's observer, without a
// cluster: the tests set deps and opts, then activate rooms (room).
type dirFixture struct {
	t       *testing.T
	sys     *actor.ActorSystem
	store   *memdb.Store
	events  chan persistence.Envelope // what the rooms published
	deps    roomgrain.Deps
	opts    Deps
	props   *actor.Props // made by the first room from deps and opts
	dir     *memdb.Directory
	sw      *switchable
	rooms   *pidRooms
	hosted  *Hosted
	metrics *Metrics
}

// chanPublisher hands every published event to a channel.
type chanPublisher chan persistence.Envelope

func (c chanPublisher) PublishRoomEvent(_ context.Context, env persistence.Envelope) error {
	select {
	case c <- env:
	default:
	}
	return nil
}

func newDirFixture(t *testing.T, refresh time.Duration) *dirFixture {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	d := &dirFixture{t: t, sys: sys, store: memdb.New(), events: make(chan persistence.Envelope, 1024),
		dir: memdb.NewDirectory(memdb.DirectoryOptions{}), hosted: NewHosted()}
	d.deps = roomgrain.Deps{Store: d.store, Publisher: chanPublisher(d.events), Gifts: roomgrain.FreeGifts(10), Config: configs.Default().Room,
		Joins: NewJoinClock()}
	d.sw = &switchable{Directory: d.dir}
	d.rooms = &pidRooms{sys: sys, pids: map[string]*actor.PID{}}
	var err error
	if d.metrics, err = NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	d.opts = Deps{Directory: d.sw, Hosted: d.hosted, Rooms: d.rooms, RefreshInterval: refresh, Metrics: d.metrics}
	return d
}

// room activates a room as the cluster's placement actor would: spawned
// from the node's one GrainProps and sent ClusterInit.
func (d *dirFixture) room(id string) *actor.PID {
	if d.props == nil {
		deps := d.deps
		deps.Observers = []roomgrain.NewObserver{New(d.opts)}
		d.props = roomgrain.GrainProps(deps)
	}
	pid := d.sys.Root.Spawn(d.props)
	d.sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: "app/" + id, Kind: roomgrain.Kind}})
	d.rooms.mu.Lock()
	d.rooms.pids["app/"+id] = pid
	d.rooms.mu.Unlock()
	return pid
}

func replyOf(res any) (*v1.CommandReply, error) {
	r, ok := res.(*v1.RoomResponse)
	if !ok {
		return nil, fmt.Errorf("room grain answered %T", res)
	}
	if r.Error != nil {
		return nil, errclass.FromWire(errclass.Code(r.Error.Code), r.Error.Class, r.Error.Message)
	}
	return r.Reply, nil
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 3s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (d *dirFixture) exec(rc *v1.RoomCommand) (*v1.CommandReply, error) {
	return d.rooms.Execute(context.Background(), rc)
}

func (d *dirFixture) mustExec(rc *v1.RoomCommand) *v1.CommandReply {
	d.t.Helper()
	r, err := d.exec(rc)
	if err != nil {
		d.t.Fatalf("%v: %v", rc, err)
	}
	return r
}

func create(roomID, cmdID, owner string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: roomID, UserId: owner, Name: "Room " + roomID}}}
}

func join(roomID, cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: roomID, UserId: user}}}
}

func heartbeat(roomID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_Heartbeat{Heartbeat: &v1.HeartbeatRequest{AppCode: "app", RoomId: roomID, UserId: user}}}
}

func gift(roomID, cmdID, from, to string, count int64) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_SendGift{SendGift: &v1.SendGiftRequest{
		CommandId: cmdID, AppCode: "app", RoomId: roomID, UserId: from, ToUserId: to, GiftId: "rose", GiftCount: count}}}
}

func leaveRoom(roomID, cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: roomID, UserId: user}}}
}

func closeRoom(roomID, cmdID, user string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_CloseRoom{CloseRoom: &v1.CloseRoomRequest{
		CommandId: cmdID, AppCode: "app", RoomId: roomID, UserId: user}}}
}

func get(roomID string) *v1.RoomCommand {
	return &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: roomID}}}
}

func (d *dirFixture) members(roomID string) []string {
	d.t.Helper()
	return d.mustExec(get(roomID)).GetRoom().GetMembers()
}

func (d *dirFixture) userRoom(user string) string {
	ur, err := d.dir.UserRoom(context.Background(), "app", user)
	if errors.Is(err, persistence.ErrNotFound) {
		return ""
	}
	if err != nil {
		d.t.Fatal(err)
	}
	return ur.RoomID
}

// leftEvents returns the RoomUserLeft events of room's log.
func (d *dirFixture) leftEvents(roomID string) []room.RoomUserLeft {
	recs, err := d.store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: roomID}, 0)
	if err != nil {
		d.t.Fatal(err)
	}
	var out []room.RoomUserLeft
	for _, r := range recs {
		for _, e := range r.Events {
			if e.EventType == room.TypeRoomUserLeft {
				ev, _ := room.DecodeEvent(e.EventType, e.Payload)
				out = append(out, ev.(room.RoomUserLeft))
			}
		}
	}
	return out
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// Joining another room makes the old room emit RoomUserLeft
// (switched_room) through its own command path, and the directory follows
// the user.
func TestDirectoryJoinElsewhereLeavesOldRoom(t *testing.T) {
	d := newDirFixture(t, time.Hour)
	d.room("r1")
	d.room("r2")
	d.mustExec(create("r1", "c1", "o1"))
	d.mustExec(create("r2", "c1", "o2"))
	d.mustExec(join("r1", "j1", "bob"))
	waitFor(t, func() bool { return d.userRoom("bob") == "r1" })
	d.mustExec(join("r2", "j2", "bob"))
	waitFor(t, func() bool { return !contains(d.members("r1"), "bob") })
	waitFor(t, func() bool { return d.userRoom("bob") == "r2" })
	left := d.leftEvents("r1")
	if len(left) != 1 || left[0] != (room.RoomUserLeft{UserID: "bob", Reason: room.ReasonSwitchedRoom}) {
		t.Fatalf("r1 left events %+v, want bob switched_room", left)
	}
	if !contains(d.members("r2"), "bob") {
		t.Fatal("bob is not in r2")
	}
	// r1's late clear must not have removed bob's r2 entry, and his
	// presence moved with him.
	// Directory writes follow the commit asynchronously (the room's
	// directory child), so wait for them like the checks above.
	r1Presence := func() []persistence.Presence {
		p, _ := d.dir.StalePresence(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "r1"}, 1<<62, 10)
		return p
	}
	waitFor(t, func() bool { p := r1Presence(); return len(p) == 1 && p[0].UserID == "o1" })
	// The owner switching rooms by creating one counts too.
	d.room("r3")
	d.mustExec(create("r3", "c1", "o1"))
	waitFor(t, func() bool { return !contains(d.members("r1"), "o1") && d.userRoom("o1") == "r3" })
	// The counter moves when the leave's reply is back, after the state.
	waitFor(t, func() bool { return counterValue(d.metrics.Leaves.WithLabelValues("left")) == 2 })
}

func TestDirectoryHeartbeatRefreshesPresence(t *testing.T) {
	d := newDirFixture(t, time.Hour)
	now := time.UnixMilli(5_000_000)
	var mu sync.Mutex
	d.deps.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	d.room("r1")
	d.mustExec(create("r1", "c1", "o1"))
	d.mustExec(join("r1", "j1", "bob"))
	mu.Lock()
	now = now.Add(40 * time.Second)
	mu.Unlock()
	d.mustExec(heartbeat("r1", "bob"))
	waitFor(t, func() bool {
		ur, err := d.dir.UserRoom(context.Background(), "app", "bob")
		return err == nil && ur.LastSeenMs == 5_040_000 && ur.JoinedAtMs == 5_000_000 && ur.Online
	})
	// A heartbeat that fails Decide (not a member) refreshes nothing.
	if _, err := d.exec(heartbeat("r1", "stranger")); !errors.Is(err, room.ErrNotMember) {
		t.Fatalf("stranger heartbeat: %v", err)
	}
	p, _ := d.dir.StalePresence(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "r1"}, 1<<62, 10)
	if len(p) != 2 {
		t.Fatalf("presence %+v, want owner and bob only", p)
	}
}

// A heat change that moves the room in the ranking is followed by a
// RoomRankChanged the room commits itself: logged, in the outbox, marked
// published without an IM send.
func TestDirectoryRankChangeIsCommittedByTheRoom(t *testing.T) {
	d := newDirFixture(t, time.Hour)
	for _, r := range []string{"r1", "r2"} {
		d.room(r)
		d.mustExec(create(r, "c1", "o-"+r))
		d.mustExec(join(r, "j1", "fan-"+r))
	}
	d.mustExec(gift("r1", "g1", "fan-r1", "o-r1", 2)) // r1: 20
	waitFor(t, func() bool {
		p, _ := d.dir.ListRooms(context.Background(), "app", 0, 10)
		return len(p.Rooms) == 2 && p.Rooms[0].RoomID == "r1"
	})
	d.mustExec(gift("r2", "g1", "fan-r2", "o-r2", 3)) // r2: 30, rank 2 -> 1
	key := persistence.RoomKey{AppCode: "app", RoomID: "r2"}
	var rec persistence.CommandRecord
	waitFor(t, func() bool {
		recs, _ := d.store.LoadCommands(context.Background(), key, 0)
		if len(recs) == 0 || recs[len(recs)-1].CommandType != cmdRankChanged {
			return false
		}
		rec = recs[len(recs)-1]
		return true
	})
	if len(rec.Events) != 1 || rec.Events[0].EventType != room.TypeRoomRankChanged {
		t.Fatalf("rank command events %+v", rec.Events)
	}
	ev, _ := room.DecodeEvent(rec.Events[0].EventType, rec.Events[0].Payload)
	if ev != (room.RoomRankChanged{Rank: 1, PrevRank: 2, Heat: 30}) {
		t.Fatalf("event %+v, want rank 2 -> 1 at heat 30", ev)
	}
	for published := false; !published; {
		select {
		case env := <-d.events:
			published = env.EventType == room.TypeRoomRankChanged
		case <-time.After(3 * time.Second):
			t.Fatal("RoomRankChanged was not published")
		}
	}
	waitFor(t, func() bool {
		row, err := d.store.GetOutbox(context.Background(), rec.Events[0].EventID)
		return err == nil && row.Status == persistence.OutboxPublished
	})
	// Entering the ranking (create) is not a change: r1 never moved down
	// through its own heat, so it has no rank event.
	recs, _ := d.store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "r1"}, 0)
	for _, r := range recs {
		if r.CommandType == cmdRankChanged {
			t.Fatalf("r1 committed a rank change: %+v", r)
		}
	}
	if got := counterValue(d.metrics.RankChanges); got != 1 {
		t.Fatalf("rank changes counted %v, want 1", got)
	}
}

// With the directory down every command still succeeds (the grain is the
// source of truth); the failures are counted; when it is back the periodic
// refresh rebuilds the room's entries, and a user who ended up in two rooms
// meanwhile stays in the one joined last.
func TestDirectoryDownCommandsSucceedAndRefreshRepairs(t *testing.T) {
	d := newDirFixture(t, 100*time.Millisecond)
	now := time.UnixMilli(9_000_000)
	var mu sync.Mutex
	d.deps.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now }
	d.room("r1")
	d.room("r2")
	d.mustExec(create("r1", "c1", "o1"))
	d.mustExec(create("r2", "c1", "o2"))
	d.mustExec(join("r1", "j1", "bob"))
	waitFor(t, func() bool { return d.userRoom("bob") == "r1" })

	d.sw.down.Store(true)
	d.mustExec(join("r2", "j2", "bob")) // the switch cannot be seen: bob is in both
	d.mustExec(join("r2", "j3", "carol"))
	d.mustExec(heartbeat("r2", "carol"))
	d.mustExec(gift("r2", "g1", "carol", "o2", 5))
	d.mustExec(&v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{
		CommandId: "l1", AppCode: "app", RoomId: "r2", UserId: "o2"}}})
	waitFor(t, func() bool {
		return counterValue(d.metrics.Errors.WithLabelValues("set_user_room")) >= 2 &&
			counterValue(d.metrics.Errors.WithLabelValues("sync_room")) >= 1
	})
	if !contains(d.members("r1"), "bob") || !contains(d.members("r2"), "bob") {
		t.Fatal("setup: bob should be in both rooms while the directory is down")
	}

	d.sw.down.Store(false)
	waitFor(t, func() bool { return !contains(d.members("r1"), "bob") })
	waitFor(t, func() bool {
		p, _ := d.dir.ListRooms(context.Background(), "app", 0, 10)
		return d.userRoom("bob") == "r2" && d.userRoom("carol") == "r2" && d.userRoom("o2") == "" &&
			len(p.Rooms) == 2 && p.Rooms[0].RoomID == "r2" && p.Rooms[0].Heat == 50 && p.Rooms[0].MemberCount == 2
	})
	if !contains(d.members("r2"), "bob") {
		t.Fatal("bob left the room he joined last")
	}
	if left := d.leftEvents("r1"); len(left) != 1 || left[0].Reason != room.ReasonSwitchedRoom {
		t.Fatalf("r1 left events %+v", left)
	}
	// o2 left r2 while the directory was down: the refresh dropped his
	// presence there.
	p, _ := d.dir.StalePresence(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "r2"}, 1<<62, 10)
	if len(p) != 2 || contains([]string{p[0].UserID, p[1].UserID}, "o2") {
		t.Fatalf("r2 presence %+v, want bob and carol", p)
	}
}

// A closed room is unlisted and lets its members' entries go; a
// passivated room unlists itself and leaves the hosted registry.
func TestDirectoryCloseAndPassivation(t *testing.T) {
	d := newDirFixture(t, time.Hour)
	d.deps.Config.IdleTimeout = 300 * time.Millisecond
	d.room("r1")
	d.room("r2")
	d.mustExec(create("r1", "c1", "o1"))
	d.mustExec(join("r1", "j1", "bob"))
	d.mustExec(create("r2", "c1", "o2"))
	if got := d.hosted.Rooms(); len(got) != 2 || got[0].RoomID != "r1" || got[1].RoomID != "r2" {
		t.Fatalf("hosted %v, want r1 and r2", got)
	}
	waitFor(t, func() bool { return d.userRoom("bob") == "r1" })
	d.mustExec(closeRoom("r1", "x1", "o1"))
	waitFor(t, func() bool {
		p, _ := d.dir.ListRooms(context.Background(), "app", 0, 10)
		return d.userRoom("bob") == "" && d.userRoom("o1") == "" && len(p.Rooms) == 1 && p.Rooms[0].RoomID == "r2"
	})
	// Both rooms idle out: r2 unlists itself, both leave the registry.
	waitFor(t, func() bool { return len(d.hosted.Rooms()) == 0 })
	p, err := d.dir.ListRooms(context.Background(), "app", 0, 10)
	if err != nil || p.Total != 0 {
		t.Fatalf("listing after passivation: %+v %v", p, err)
	}
	// The owner of the passivated room keeps his entry: he is still in it.
	if d.userRoom("o2") != "r2" {
		t.Fatal("passivation must not take members out of their room")
	}
}

// A room the refresh wheel visits passivates on it: not while commands
// come (one every 50 ms for a second, five per idle timeout), never
// before IdleTimeout after its last command, and soon after that, with its
// snapshot written and out of the registry, although refresh ticks keep
// coming (they do not count as activity).
func TestDirectoryIdleRoomPassivatesOnTheWheel(t *testing.T) {
	const idle = 250 * time.Millisecond
	d := newDirFixture(t, 20*time.Millisecond)
	d.deps.Config.IdleTimeout = idle
	d.room("r1")
	d.mustExec(create("r1", "c1", "o1"))
	var last time.Time
	for i := range 20 {
		time.Sleep(50 * time.Millisecond)
		// A room passivated early would not answer: the fixture never
		// activates it again.
		r, err := d.exec(join("r1", fmt.Sprint("j", i), fmt.Sprint("u", i)))
		if err != nil {
			t.Fatalf("command %d while active: %v", i, err)
		}
		if r.RoomSeq != int64(i+2) {
			t.Fatalf("command %d at seq %d, want %d", i, r.RoomSeq, i+2)
		}
		last = time.Now()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(d.hosted.Rooms()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle room did not passivate within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if gone := time.Since(last); gone < idle {
		t.Fatalf("passivated %s after its last command, before the idle timeout %s", gone, idle)
	}
	snap, err := d.store.LoadSnapshot(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "r1"})
	if err != nil || snap.Seq != 21 {
		t.Fatalf("snapshot after passivation: seq %d, %v; want 21", snap.Seq, err)
	}
}

// One user joining 20 rooms at once ends up in exactly one of them, the
// one the directory names.
func TestDirectoryConcurrentJoinsLeaveOneRoom(t *testing.T) {
	d := newDirFixture(t, time.Hour)
	const n = 20
	for i := range n {
		r := fmt.Sprintf("r%02d", i)
		d.room(r)
		d.mustExec(create(r, "c1", "owner-"+r))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := d.exec(join(fmt.Sprintf("r%02d", i), "j1", "bob")); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var in []string
	waitFor(t, func() bool {
		in = in[:0]
		for i := range n {
			r := fmt.Sprintf("r%02d", i)
			if contains(d.members(r), "bob") {
				in = append(in, r)
			}
		}
		return len(in) == 1
	})
	waitFor(t, func() bool { return d.userRoom("bob") == in[0] })
}

// Two rooms' directory work is not ordered. A user joins w, leaves it and
// joins x; w's directory write of the first join is held back until x's is
// done. When it lands it must not evict the user from x: that join is no
// longer the user's membership in w.
func TestDirectoryLateJoinWriteDoesNotEvictFromNewerRoom(t *testing.T) {
	d := newDirFixture(t, time.Hour)
	d.room("w")
	d.room("x")
	d.mustExec(create("x", "c1", "ox"))
	waitFor(t, func() bool { return d.userRoom("ox") == "x" })
	// w's worker gets stuck on its owner's write, so the work of bob's
	// join queues behind it.
	arrived, release := d.sw.hold("w")
	d.mustExec(create("w", "c1", "ow"))
	<-arrived
	d.mustExec(join("w", "j1", "bob"))
	d.mustExec(leaveRoom("w", "l1", "bob"))
	d.mustExec(join("x", "j2", "bob"))
	waitFor(t, func() bool { return d.userRoom("bob") == "x" })
	release()
	// w's worker catches up: the owner's write, then bob's join and clear.
	waitFor(t, func() bool { return d.userRoom("ow") == "w" })
	time.Sleep(200 * time.Millisecond) // a wrong leave to x would have landed now
	if d.userRoom("bob") != "x" {
		t.Fatalf("directory says bob is in %q, want x", d.userRoom("bob"))
	}
	if !contains(d.members("x"), "bob") {
		t.Fatal("a late directory write of an old join evicted bob from the room he is in")
	}
	if left := d.leftEvents("x"); len(left) != 0 {
		t.Fatalf("x emitted %+v, want no leave", left)
	}
}

// The rooms of one node share one Deps with its defaults, completed once
// however many rooms start at the same time.
func TestDepsMadeOncePerNode(t *testing.T) {
	n := newNode(Deps{Directory: memdb.NewDirectory(memdb.DirectoryOptions{}), Timeout: time.Second})
	got := make([]*Deps, 16)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = n.deps(roomgrain.Activation{})
		}()
	}
	wg.Wait()
	for i, p := range got {
		if p != got[0] {
			t.Fatalf("room %d got its own Deps", i)
		}
	}
	if got[0].Timeout != time.Second || got[0].RefreshInterval != 30*time.Second || got[0].MaxBacklog != 1000 || got[0].ListingGap != 250*time.Millisecond {
		t.Fatalf("shared deps %+v, want the node's timeout and the defaults", got[0])
	}
}

// Without a directory there is no observer: the rooms run as without one.
func TestNoDirectoryNoObserver(t *testing.T) {
	if o := New(Deps{})(roomgrain.Activation{}); o != nil {
		t.Fatalf("observer %T without a directory, want none", o)
	}
}
