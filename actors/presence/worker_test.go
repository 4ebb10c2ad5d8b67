package presence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hyapp/roomcell/actors/directory"
	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/actors/supervise/supervisetest"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/room"
)

// fakeRooms records the leaves and answers with errs[user] (nil: left).
type fakeRooms struct {
	mu     sync.Mutex
	leaves []*v1.LeaveRoomRequest
	errs   map[string]error
	dup    map[string]bool
}

func (f *fakeRooms) Execute(_ context.Context, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := rc.GetLeaveRoom()
	f.leaves = append(f.leaves, l)
	if err := f.errs[l.UserId]; err != nil {
		return nil, err
	}
	return &v1.CommandReply{Duplicate: f.dup[l.UserId]}, nil
}

func (f *fakeRooms) users() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.leaves {
		out = append(out, l.RoomId+"/"+l.UserId)
	}
	return out
}

var (
	keyR1 = persistence.RoomKey{AppCode: "app", RoomID: "r1"}
	keyR2 = persistence.RoomKey{AppCode: "app", RoomID: "r2"}
	keyR3 = persistence.RoomKey{AppCode: "app", RoomID: "r3"}
	t0    = time.UnixMilli(10_000_000)
)

func testDeps(t *testing.T) (Deps, *memdb.Directory, *fakeRooms) {
	dir := memdb.NewDirectory(memdb.DirectoryOptions{})
	rooms := &fakeRooms{errs: map[string]error{}, dup: map[string]bool{}}
	h := directory.NewHosted()
	h.Add(keyR1)
	h.Add(keyR2)
	d := Deps{
		Directory: dir, Hosted: h, Rooms: rooms, NodeID: "n1",
		Config: configs.WithDefaults(configs.PresenceConfig{StaleAfter: 60 * time.Second, ScanInterval: 5 * time.Second}),
		Logger: slog.New(slog.DiscardHandler),
		Clock:  func() time.Time { return t0 },
	}
	return d, dir, rooms
}

func beat(t *testing.T, dir *memdb.Directory, key persistence.RoomKey, user string, ago time.Duration) {
	t.Helper()
	if err := dir.Heartbeat(context.Background(), key, user, t0.Add(-ago).UnixMilli()); err != nil {
		t.Fatal(err)
	}
}

func TestScanLeavesStaleMembersOfHostedRoomsOnly(t *testing.T) {
	d, dir, rooms := testDeps(t)
	beat(t, dir, keyR1, "old", 70*time.Second)
	beat(t, dir, keyR1, "edge", 60*time.Second) // exactly stale_after: stale
	beat(t, dir, keyR1, "fresh", 59*time.Second)
	beat(t, dir, keyR2, "gone", 61*time.Second)
	beat(t, dir, keyR3, "elsewhere", time.Hour) // r3 is hosted by another node
	res, _, err := ScanOnce(context.Background(), d, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rooms.users(), []string{"r1/old", "r1/edge", "r2/gone"}; !slices.Equal(got, want) {
		t.Fatalf("leaves %v, want %v", got, want)
	}
	if res != (Result{Rooms: 2, Stale: 3, Left: 3}) {
		t.Fatalf("result %+v", res)
	}
	l := rooms.leaves[0]
	if l.Reason != room.ReasonHeartbeatTimeout || l.AppCode != "app" ||
		l.CommandId != LeaveCommandID(keyR1, "old", t0.Add(-70*time.Second).UnixMilli()) {
		t.Fatalf("leave %+v", l)
	}
	if err := room.CheckID("command_id", l.CommandId); err != nil {
		t.Fatalf("derived command_id is not a valid id: %v", err)
	}
	// The same entry gives the same id; a newer heartbeat a new one.
	first, again := LeaveCommandID(keyR1, "old", 1), LeaveCommandID(keyR1, "old", 1)
	other := persistence.RoomKey{AppCode: keyR1.AppCode, RoomID: keyR1.RoomID + "x"}
	if first != again || first == LeaveCommandID(keyR1, "old", 2) ||
		first == LeaveCommandID(keyR1, "older", 1) || first == LeaveCommandID(other, "old", 1) {
		t.Fatal("LeaveCommandID must be a function of (room, user, last seen)")
	}
}

// A user the room no longer has (or whose leave is a duplicate of an
// earlier scan's) has an orphan entry: it is cleared, not retried forever.
// A room that cannot be reached leaves the entry for the next scan.
func TestScanClearsOrphansAndKeepsFailures(t *testing.T) {
	d, dir, rooms := testDeps(t)
	beat(t, dir, keyR1, "orphan", 2*time.Minute)
	beat(t, dir, keyR1, "dup", 2*time.Minute)
	beat(t, dir, keyR1, "unreachable", 2*time.Minute)
	rooms.errs["orphan"] = room.ErrNotMember
	rooms.dup["dup"] = true
	rooms.errs["unreachable"] = errclass.Unavailable
	res, _, err := ScanOnce(context.Background(), d, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cleared != 2 || res.Failed != 1 || res.Left != 0 {
		t.Fatalf("result %+v, want 2 cleared, 1 failed", res)
	}
	left, _ := dir.StalePresence(context.Background(), keyR1, t0.UnixMilli(), 10)
	if len(left) != 1 || left[0].UserID != "unreachable" {
		t.Fatalf("presence after scan %+v, want only the unreachable one", left)
	}
}

// batch_size caps the leaves of one scan; the next scan starts at the
// room after the last one scanned, so one busy room cannot starve the
// others.
func TestScanBatchSizeAndRotation(t *testing.T) {
	d, dir, rooms := testDeps(t)
	d.Config.BatchSize = 2
	for _, u := range []string{"a", "b", "c"} {
		beat(t, dir, keyR1, u, 2*time.Minute)
	}
	beat(t, dir, keyR2, "z", 2*time.Minute)
	rooms.errs["a"], rooms.errs["b"], rooms.errs["c"] = errclass.Unavailable, errclass.Unavailable, errclass.Unavailable
	res, next, err := ScanOnce(context.Background(), d, 0)
	if err != nil || res.Stale != 2 || next != 1 {
		t.Fatalf("first scan %+v next %d %v, want 2 from r1 then next at r2", res, next, err)
	}
	_, next, _ = ScanOnce(context.Background(), d, next)
	if got := rooms.users(); !slices.Equal(got, []string{"r1/a", "r1/b", "r2/z", "r1/a"}) || next != 1 {
		t.Fatalf("leaves %v next %d: r2 must get its turn", got, next)
	}
}

func TestScanDirectoryDownIsCountedNotFatal(t *testing.T) {
	d, dir, rooms := testDeps(t)
	beat(t, dir, keyR1, "old", 2*time.Minute)
	_ = dir.Close()
	res, _, err := ScanOnce(context.Background(), d, 0)
	if err != nil || res.Errors != 2 || len(rooms.users()) != 0 {
		t.Fatalf("scan with the directory down: %+v %v", res, err)
	}
}

func TestStartValidates(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }))
	t.Cleanup(sys.Shutdown)
	sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	d, _, _ := testDeps(t)
	d.Config = configs.WithDefaults(configs.PresenceConfig{StaleAfter: time.Second, ScanInterval: 5 * time.Second})
	if _, err := Start(sup, d); err == nil || !contains(err.Error(), "presence.stale_after") {
		t.Fatalf("stale_after < scan_interval: %v, want an error naming presence.stale_after", err)
	}
	d.Rooms = nil
	if _, err := Start(sup, d); err == nil {
		t.Fatal("Start without Rooms succeeded")
	}
}

// The actor scans every scan_interval and stops cleanly.
func TestWorkerActorScansOnItsTimer(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }))
	t.Cleanup(sys.Shutdown)
	sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	d, dir, rooms := testDeps(t)
	d.Config = configs.WithDefaults(configs.PresenceConfig{StaleAfter: time.Second, ScanInterval: 50 * time.Millisecond})
	w, err := Start(sup, d)
	if err != nil {
		t.Fatal(err)
	}
	beat(t, dir, keyR1, "u1", time.Minute)
	deadline := time.Now().Add(3 * time.Second)
	for len(rooms.users()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not scan on its timer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, err := w.RunNow(3 * time.Second)
	if err != nil || res.Err != nil || res.Result.Rooms != 2 {
		t.Fatalf("RunNow: %+v %v", res, err)
	}
	if err := w.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	n := len(rooms.users())
	time.Sleep(150 * time.Millisecond)
	if len(rooms.users()) != n {
		t.Fatal("the worker scanned after Stop")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// panickyRooms panics on its first n leaves, then leaves as fakeRooms.
type panickyRooms struct {
	*fakeRooms
	n     int64
	calls atomic.Int64
}

func (p *panickyRooms) Execute(ctx context.Context, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	if p.calls.Add(1) <= p.n {
		panic("leave bug")
	}
	return p.fakeRooms.Execute(ctx, rc)
}

// For the presence stale worker: a scan that panics 100
// times in a row, then recovers. The worker supervisor restarts it every
// time, with its backoff; the restarts are counted in Health and
// roomcell_worker_restarts_total{worker}; the worker is reported down
// while it waits (roomcell_workers_down); afterwards the stale member leaves.
func TestWorkerSurvivesRepeatedPanics(t *testing.T) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	sup, reg := supervisetest.NewSupervisor(t, sys)
	const panics = 100
	d, dir, fr := testDeps(t)
	rooms := &panickyRooms{fakeRooms: fr, n: panics}
	d.Rooms = rooms
	d.Config = configs.WithDefaults(configs.PresenceConfig{StaleAfter: time.Second, ScanInterval: 5 * time.Millisecond})
	beat(t, dir, keyR1, "u1", time.Minute)
	stopWatch := supervisetest.WatchDown(sup.Health(), WorkerName)
	w, err := Start(sup, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(5 * time.Second) })
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(fr.users(), "r1/u1") {
		if time.Now().After(deadline) {
			t.Fatalf("the stale member did not leave after the panics (%d calls, %d restarts)", rooms.calls.Load(), sup.Health().Restarts(WorkerName))
		}
		time.Sleep(10 * time.Millisecond)
	}
	sawDown := stopWatch()
	supervisetest.CheckRecovered(t, sup, reg, w, WorkerName, panics, sawDown)
}

// countingDir counts the worker's batched reads.
type countingDir struct {
	*memdb.Directory
	reads atomic.Int32
}

func (c *countingDir) StalePresenceRooms(ctx context.Context, keys []persistence.RoomKey, beforeMs int64, limit int) ([][]persistence.Presence, error) {
	c.reads.Add(1)
	return c.Directory.StalePresenceRooms(ctx, keys, beforeMs, limit)
}

// leavingRooms is fakeRooms whose leaves take the user's presence out, as
// a room's leave does through its directory worker.
type leavingRooms struct {
	*fakeRooms
	dir *memdb.Directory
}

func (l *leavingRooms) Execute(ctx context.Context, rc *v1.RoomCommand) (*v1.CommandReply, error) {
	r, err := l.fakeRooms.Execute(ctx, rc)
	lv := rc.GetLeaveRoom()
	if err == nil {
		err = l.dir.ClearUserRoom(ctx, persistence.RoomKey{AppCode: lv.AppCode, RoomID: lv.RoomId}, lv.UserId)
	}
	return r, err
}

// A node with 1,000 rooms reads them 256 to a call, and scans with a
// budget of 7 leaves each take every stale member of every room exactly
// once, fresh members never, whatever room a budget runs out in.
func TestScanReadsRoomsInBatchesAndLeavesEachStaleMemberOnce(t *testing.T) {
	d, dir, rooms := testDeps(t)
	h := directory.NewHosted()
	cd := &countingDir{Directory: dir}
	lr := &leavingRooms{fakeRooms: rooms, dir: dir}
	d.Hosted, d.Directory, d.Rooms = h, cd, lr
	d.Config.BatchSize = 7
	want := map[string]bool{}
	for i := range 1000 {
		key := persistence.RoomKey{AppCode: "app", RoomID: fmt.Sprintf("n%04d", i)}
		h.Add(key)
		beat(t, dir, key, "fresh", time.Second)
		for j := range i % 4 { // 0 to 3 stale members a room
			user := fmt.Sprint("stale", j)
			beat(t, dir, key, user, 61*time.Second)
			want[key.RoomID+"/"+user] = true
		}
	}
	res, next, err := ScanOnce(context.Background(), d, 0)
	if err != nil || res.Stale != 7 || res.Left != 7 || cd.reads.Load() != 1 {
		t.Fatalf("first scan %+v, %d reads, %v: want 7 leaves from one read", res, cd.reads.Load(), err)
	}
	for scans := 1; len(rooms.users()) < len(want); scans++ {
		if scans > len(want) {
			t.Fatalf("%d scans left %d of %d stale members", scans, len(want)-len(rooms.users()), len(want))
		}
		if _, next, err = ScanOnce(context.Background(), d, next); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, u := range rooms.users() {
		if !want[u] || seen[u] {
			t.Fatalf("leave of %s: not stale, or twice", u)
		}
		seen[u] = true
	}
	cd.reads.Store(0)
	d.Config.BatchSize = 10_000
	res, _, err = ScanOnce(context.Background(), d, 0)
	if err != nil || res.Rooms != 1000 || res.Stale != 0 || cd.reads.Load() != 4 {
		t.Fatalf("scan of 1,000 clean rooms: %+v, %d reads, %v; want 1,000 rooms in 4 reads", res, cd.reads.Load(), err)
	}
}

// The stale worker takes presence as given: a field left unset in a
// section built in code is refused, naming its key, rather than run as
// zero or quietly defaulted a second time.
func TestUnsetConfigIsRefused(t *testing.T) {
	for _, tc := range []struct {
		key   string
		unset func(*configs.PresenceConfig)
	}{
		{"presence.scan_interval", func(c *configs.PresenceConfig) { c.ScanInterval = 0 }},
		{"presence.stale_after", func(c *configs.PresenceConfig) { c.StaleAfter = 0 }},
		{"presence.batch_size", func(c *configs.PresenceConfig) { c.BatchSize = 0 }},
	} {
		d, _, _ := testDeps(t)
		tc.unset(&d.Config)
		var ce *configs.Error
		if _, _, err := ScanOnce(context.Background(), d, 0); !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("ScanOnce: %v, want a config error on %s", err, tc.key)
		}
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
		t.Cleanup(sys.Shutdown)
		sup, _ := supervisetest.NewSupervisor(t, sys)
		if _, err := Start(sup, d); !errors.As(err, &ce) || ce.Key != tc.key {
			t.Errorf("Start: %v, want a config error on %s", err, tc.key)
		}
	}
}
