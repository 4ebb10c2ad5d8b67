package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/ownership"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// twoRoomDBs starts a process whose rooms are split over two databases:
// shards 0-511 on the shared MariaDB ("default"), 512-1023 on a private
// mariadbd the test may pause ("b").
func twoRoomDBs(t *testing.T) (*App, v1.RoomServiceClient, *mysqltest.Server) {
	t.Helper()
	srv := mysqltest.StartServer(t)
	_, dbB := mysqltest.NewDatabaseOn(t, srv.DSN)
	mcfg, db := mysqltest.NewDatabase(t)
	app, rc := startDev(t, func(c *configs.Config) {
		c.Roles = []string{configs.RoleRoom, configs.RoleWallet, configs.RoleRelay}
		c.Notice.WalletNoticeWorker.Enabled, c.Notice.RoomNoticeWorker.Enabled = false, false
		c.Store.Kind = configs.StoreMySQL
		c.MySQL.DSN = mcfg.DSN
		c.MySQL.RoomDatabase, c.MySQL.WalletDatabase, c.MySQL.NoticeDatabase = db, db, db
		c.MySQL.AutoMigrate = true
		c.MySQL.RoomDBs = map[string]configs.RoomDB{"b": {DSN: srv.DSN, Database: dbB}}
		c.MySQL.RoomShards = map[string][]string{"default": {"0-511"}, "b": {"512-1023"}}
		c.TencentIM.AllowFake = true
		c.Room.StoreTimeout = 2 * time.Second
		c.OutboxWorker.PollInterval = 200 * time.Millisecond
	})
	if len(app.roomDBs) != 2 || app.roomDBs[0].key != "default" || app.roomDBs[1].key != "b" {
		t.Fatalf("room databases %d, want default and b", len(app.roomDBs))
	}
	return app, rc, srv
}

// roomsOn returns n room ids of app "sh" whose shard is in [lo, hi].
func roomsOn(n, lo, hi int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprint("r", i)
		if s := ownership.ShardOf("sh/"+id, 1024); s >= lo && s <= hi {
			out = append(out, id)
		}
	}
	return out
}

// roomLoad runs one client per room: join and leave in turn, each
// command retried with its command_id until it is acknowledged (what a
// client of a refused command does).
type roomLoad struct {
	rc   v1.RoomServiceClient
	mu   sync.Mutex
	acks map[string]map[string]int64 // room → command_id → room_seq acknowledged
	// lat are the acknowledged commands' latencies by room, with the time
	// each ended.
	lat    map[string][]sample
	failed map[string]int // room → failed attempts (unavailable, deadline)
	// rejected are commands answered with another error: none expected.
	rejected []string
}

type sample struct {
	end time.Time
	d   time.Duration
}

func (l *roomLoad) run(ctx context.Context, roomID string) {
	for n := 0; ctx.Err() == nil; n++ {
		// A user is in one room of an app at a time: users of their own.
		id, user := fmt.Sprint("c", n), fmt.Sprint(roomID, "-u", n/2)
		for ctx.Err() == nil {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			var r *v1.CommandReply
			var err error
			if n%2 == 0 {
				r, err = l.rc.JoinRoom(cctx, &v1.JoinRoomRequest{CommandId: id, AppCode: "sh", RoomId: roomID, UserId: user})
			} else {
				r, err = l.rc.LeaveRoom(cctx, &v1.LeaveRoomRequest{CommandId: id, AppCode: "sh", RoomId: roomID, UserId: user})
			}
			cancel()
			end := time.Now()
			l.mu.Lock()
			switch code := status.Code(err); {
			case err == nil:
				l.acks[roomID][id] = r.RoomSeq
				l.lat[roomID] = append(l.lat[roomID], sample{end, end.Sub(start)})
			case code == codes.Unavailable || code == codes.DeadlineExceeded:
				l.failed[roomID]++
			default:
				l.rejected = append(l.rejected, fmt.Sprintf("%s %s: %v", roomID, id, err))
				err = nil // a refusal is the command's answer: retrying it changes nothing
			}
			l.mu.Unlock()
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// window returns the latencies of rooms' commands that ended in [from, to).
func (l *roomLoad) window(rooms []string, from, to time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, r := range rooms {
		for _, s := range l.lat[r] {
			if !s.end.Before(from) && s.end.Before(to) {
				out = append(out, s.d)
			}
		}
	}
	slices.Sort(out)
	return out
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// Two room databases, one paused 10 s under load (SIGSTOP of its own
// mariadbd): the other database's rooms keep answering every command,
// the paused database's rooms answer again after it is back, and on both
// every acknowledged command is in its room's log exactly once. The
// healthy rooms' p50/p99 before and during the pause are logged as a
// measurement (the target, ≤ 1.2×, is a figure of the benchmark run, not
// asserted on a shared two-core machine).
func TestTwoRoomDatabasesOnePausedOnlyItsRoomsWait(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a mariadbd and runs 25 s of load")
	}
	app, rc, srv := twoRoomDBs(t)
	healthy, paused := roomsOn(6, 0, 511), roomsOn(6, 512, 1023)
	all := append(slices.Clone(healthy), paused...)
	for _, r := range all {
		if _, err := rc.CreateRoom(ctxT(t), &v1.CreateRoomRequest{CommandId: "create", AppCode: "sh", RoomId: r, UserId: r + "-owner", Name: "n"}); err != nil {
			t.Fatalf("create %s: %v", r, err)
		}
	}
	l := &roomLoad{rc: rc, acks: map[string]map[string]int64{}, lat: map[string][]sample{}, failed: map[string]int{}}
	for _, r := range all {
		l.acks[r] = map[string]int64{}
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range all {
		wg.Go(func() { l.run(ctx, r) })
	}
	time.Sleep(500 * time.Millisecond) // warm: pools, grains
	t0 := time.Now()
	time.Sleep(8 * time.Second)
	srv.Pause()
	tp := time.Now()
	time.Sleep(10 * time.Second)
	srv.Resume()
	tr := time.Now()
	// The paused database's rooms answer again: each acknowledges a
	// command that ended after the resume.
	deadline := time.Now().Add(20 * time.Second)
	for {
		back := 0
		for _, r := range paused {
			if len(l.window([]string{r}, tr, time.Now().Add(time.Hour))) > 0 {
				back++
			}
		}
		if back == len(paused) {
			break
		}
		if time.Now().After(deadline) {
			if p := os.Getenv("RC_TEST_STACKS"); p != "" {
				buf := make([]byte, 64<<20)
				_ = os.WriteFile(p, buf[:runtime.Stack(buf, true)], 0o644)
			}
			for _, r := range paused {
				l.mu.Lock()
				n := len(l.lat[r])
				var last time.Time
				if n > 0 {
					last = l.lat[r][n-1].end
				}
				t.Logf("room %s: %d acks, last %v, failed %d", r, n, last.Format("15:04:05.000"), l.failed[r])
				l.mu.Unlock()
			}
			stop()
			wg.Wait()
			t.Fatalf("%d of %d rooms of the paused database answered within 20 s of its resume", back, len(paused))
		}
		time.Sleep(100 * time.Millisecond)
	}
	recovered := time.Since(tr)
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()

	before, during := l.window(healthy, t0, tp), l.window(healthy, tp, tr)
	t.Logf("healthy database's rooms: before the pause %d commands p50 %v p99 %v; during %d commands p50 %v p99 %v (p99 ×%.2f)",
		len(before), pct(before, .5), pct(before, .99), len(during), pct(during, .5), pct(during, .99),
		float64(pct(during, .99))/float64(max(pct(before, .99), 1)))
	t.Logf("paused database's rooms: every room answered again %v after the resume; %d attempts failed while paused",
		recovered.Round(10*time.Millisecond), sumFailed(l, paused))
	if len(l.rejected) > 0 {
		t.Errorf("%d commands refused, e.g. %s", len(l.rejected), l.rejected[0])
	}
	for _, r := range healthy {
		if l.failed[r] > 0 {
			t.Errorf("room %s of the healthy database: %d commands failed while the other database was paused", r, l.failed[r])
		}
		if len(l.window([]string{r}, tp.Add(time.Second), tr)) == 0 {
			t.Errorf("room %s of the healthy database acknowledged nothing during the other database's pause", r)
		}
	}
	if sumFailed(l, paused) == 0 {
		t.Error("no command of the paused database's rooms failed: the pause did not reach them")
	}

	// 0 lost, 0 doubled, on both databases; and each room's log is in
	// its own database only.
	for i, db := range app.roomDBs {
		for _, r := range all {
			key := persistence.RoomKey{AppCode: "sh", RoomID: r}
			lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			recs, err := db.store.LoadCommands(lctx, key, 0)
			cancel()
			if err != nil {
				t.Fatalf("%s: log of %s: %v", db.key, r, err)
			}
			if app.roomShards.IndexOf(key) != i {
				if len(recs) != 0 {
					t.Errorf("room %s has %d commands in database %s, not its own", r, len(recs), db.key)
				}
				continue
			}
			seen := map[string]int64{}
			for j, rec := range recs {
				if rec.Seq != int64(j+1) {
					t.Fatalf("room %s: seq %d at position %d", r, rec.Seq, j)
				}
				if _, dup := seen[rec.CommandID]; dup {
					t.Errorf("room %s: command %s twice in the log (doubled)", r, rec.CommandID)
				}
				seen[rec.CommandID] = rec.Seq
			}
			for id, seq := range l.acks[r] {
				if got, ok := seen[id]; !ok || got != seq {
					t.Errorf("room %s: acknowledged %s at seq %d, log has %d (%v): lost", r, id, seq, got, ok)
				}
			}
			for _, rec := range recs {
				if _, acked := l.acks[r][rec.CommandID]; !acked && rec.CommandID != "create" {
					t.Errorf("room %s: %s %s (seq %d) in the log, never acknowledged", r, rec.CommandType, rec.CommandID, rec.Seq)
				}
			}
		}
	}
}

func sumFailed(l *roomLoad, rooms []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range rooms {
		n += l.failed[r]
	}
	return n
}
