package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
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
func twoRoomDBs(t testing.TB) (*App, v1.RoomServiceClient, *mysqltest.Server) {
	t.Helper()
	srv := mysqltest.StartServer(t)
	_, dbB := mysqltest.NewDatabaseOn(t, srv.DSN)
	app, rc := startDevB(t, twoDBConfig(t, srv.DSN, dbB))
	if len(app.roomDBs) != 2 || app.roomDBs[0].key != "default" || app.roomDBs[1].key != "b" {
		t.Fatalf("room databases %d, want default and b", len(app.roomDBs))
	}
	// Each database has its own relay and purge worker, and its pool and
	// worker metrics are told apart.
	for _, w := range []string{"worker room_outbox@default", "worker room_outbox@b", "worker retention_purge@default", "worker retention_purge@b"} {
		if !slices.Contains(app.started, w) {
			t.Fatalf("start steps %v lack %s", app.started, w)
		}
	}
	for _, m := range []struct{ name, label, value string }{
		{"go_sql_open_connections", "db_name", "room"}, {"go_sql_open_connections", "db_name", "room_b"},
		{"room_outbox_pending_total", "room_db", "default"}, {"room_outbox_pending_total", "room_db", "b"},
	} {
		if !hasSeries(t, app, m.name, m.label, m.value) {
			t.Fatalf("no %s{%s=%q}", m.name, m.label, m.value)
		}
	}
	return app, rc, srv
}

// twoDBConfig is the configuration of twoRoomDBs: shards 0-511 on a new
// database of the shared MariaDB ("default"), 512-1023 on database dbB of
// dsnB ("b"); room, wallet and relay roles, no notice workers.
func twoDBConfig(t testing.TB, dsnB, dbB string) func(*configs.Config) {
	mcfg, db := mysqltest.NewDatabase(t)
	return func(c *configs.Config) {
		c.Roles = []string{configs.RoleRoom, configs.RoleWallet, configs.RoleRelay}
		c.Notice.WalletNoticeWorker.Enabled, c.Notice.RoomNoticeWorker.Enabled = false, false
		c.Store.Kind = configs.StoreMySQL
		c.MySQL.DSN = mcfg.DSN
		c.MySQL.RoomDatabase, c.MySQL.WalletDatabase, c.MySQL.NoticeDatabase = db, db, db
		c.MySQL.AutoMigrate = true
		c.MySQL.RoomDBs = map[string]configs.RoomDB{"b": {DSN: dsnB, Database: dbB}}
		c.MySQL.RoomShards = map[string][]string{"default": {"0-511"}, "b": {"512-1023"}}
		c.TencentIM.AllowFake = true
		c.Room.StoreTimeout = 2 * time.Second
		c.OutboxWorker.PollInterval = 200 * time.Millisecond
	}
}

func hasSeries(t testing.TB, app *App, name, label, value string) bool {
	t.Helper()
	mfs, err := app.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return true
				}
			}
		}
	}
	return false
}

// migrate covers every room database of the map: mysql.dsn's through
// MigrateAll, the others here, each once.
func TestMigrateRoomDBsCoversTheMapsOtherDatabases(t *testing.T) {
	c, err := configs.Parse([]byte(`store: {kind: mysql}
mysql:
  dsn: "root@tcp(127.0.0.1:3306)/"
  room_dbs: {b: {dsn: "root@tcp(127.0.0.1:3307)/"}, c: {dsn: "root@tcp(127.0.0.1:3306)/", database: rooms_c}}
  room_shards: {default: ["0-99"], b: ["100-999"], c: ["1000-1023"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = migrateRoomDBs(context.Background(), c, func(_ context.Context, m configs.MySQLConfig) error {
		got = append(got, m.DSN+" "+m.RoomDatabase)
		return nil
	})
	if want := []string{"root@tcp(127.0.0.1:3307)/ hyapp_room", "root@tcp(127.0.0.1:3306)/ rooms_c"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("migrated %v (%v), want %v", got, err, want)
	}
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
	rc     v1.RoomServiceClient
	prefix string // of command and user ids: runs on the same rooms do not collide
	mu     sync.Mutex
	acks   map[string]map[string]int64 // room → command_id → room_seq acknowledged
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

func (l *roomLoad) run(ctx context.Context, roomID string, every time.Duration) {
	next := time.Now()
	for n := 0; ctx.Err() == nil; n++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(every)
		// A user is in one room of an app at a time: users of their own.
		id, user := fmt.Sprint(l.prefix, "c", n), fmt.Sprint(roomID, "-", l.prefix, "u", n/2)
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

// pauseRun is one run of the two-database scenario: paced load on every
// room, before (8 s), a pause of database b (10 s; none in a control
// run), after it.
type pauseRun struct {
	l               *roomLoad
	healthy, paused []string
	t0, tp, tr      time.Time
	recovered       time.Duration // until every paused room answered again; < 0: not within 20 s
}

// perRoomInterval paces each room's client: 12 rooms at one command per
// 20 ms is 600 commands/s, the load of the outside tests.
const perRoomInterval = 20 * time.Millisecond

func runPause(tb testing.TB, rc v1.RoomServiceClient, srv *mysqltest.Server, prefix string, pause bool) pauseRun {
	tb.Helper()
	run := pauseRun{healthy: roomsOn(6, 0, 511), paused: roomsOn(6, 512, 1023)}
	l, stop := startRoomLoad(tb, rc, prefix, append(slices.Clone(run.healthy), run.paused...))
	run.l = l
	time.Sleep(time.Second) // warm: pools, grains
	run.t0 = time.Now()
	time.Sleep(8 * time.Second)
	if pause {
		srv.Pause()
	}
	run.tp = time.Now()
	time.Sleep(10 * time.Second)
	if pause {
		srv.Resume()
	}
	run.tr = time.Now()
	run.recovered = l.waitBack(run.paused, run.tr)
	time.Sleep(8 * time.Second)
	stop()
	return run
}

// Two room databases, one paused 10 s under load (SIGSTOP of its own
// mariadbd): the other database's rooms keep answering every command,
// the paused database's rooms answer again after it is back, and on both
// every acknowledged command is in its room's log exactly once. The
// healthy rooms' latencies are logged; the p99 target (≤ 1.2× before)
// is BenchmarkTwoRoomDatabasesOnePaused's figure, not asserted here.
func TestTwoRoomDatabasesOnePausedOnlyItsRoomsWait(t *testing.T) {
	app, rc, srv := twoRoomDBs(t)
	run := runPause(t, rc, srv, "t", true)
	l, healthy, paused := run.l, run.healthy, run.paused
	all := append(slices.Clone(healthy), paused...)
	before, during := l.window(healthy, run.t0, run.tp), l.window(healthy, run.tp, run.tr)
	t.Logf("healthy database's rooms: before the pause %d commands p50 %v p99 %v; during %d commands p50 %v p99 %v",
		len(before), pct(before, .5), pct(before, .99), len(during), pct(during, .5), pct(during, .99))
	if run.recovered < 0 {
		t.Fatalf("the paused database's rooms did not all answer within 20 s of its resume")
	}
	t.Logf("paused database's rooms: every room answered again %v after the resume; %d attempts failed while paused",
		run.recovered.Round(10*time.Millisecond), sumFailed(l, paused))
	if len(l.rejected) > 0 {
		t.Errorf("%d commands refused, e.g. %s", len(l.rejected), l.rejected[0])
	}
	for _, r := range healthy {
		if l.failed[r] > 0 {
			t.Errorf("room %s of the healthy database: %d commands failed while the other database was paused", r, l.failed[r])
		}
		// Paced at one per 20 ms, a room that answers acknowledges ~450
		// commands in the 9 s after the pause's first second (~200 under
		// -race on a busy machine); a room held up by the paused database
		// would acknowledge none.
		if n := len(l.window([]string{r}, run.tp.Add(time.Second), run.tr)); n < 20 {
			t.Errorf("room %s of the healthy database acknowledged %d commands during the other database's pause", r, n)
		}
	}
	if sumFailed(l, paused) == 0 {
		t.Error("no command of the paused database's rooms failed: the pause did not reach them")
	}

	// Every event of both databases reaches IM: each database's relay
	// and room publishers leave no row pending once the load stops.
	for _, db := range app.roomDBs {
		st, ok := db.store.(interface {
			OutboxStats(context.Context) (persistence.OutboxStats, error)
		})
		if !ok {
			t.Fatalf("%s: no OutboxStats", db.key)
		}
		var last persistence.OutboxStats
		deadline := time.Now().Add(30 * time.Second)
		for {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s, err := st.OutboxStats(sctx)
			cancel()
			if err == nil && s.Pending == 0 && s.Parked == 0 {
				break
			}
			last = s
			if time.Now().After(deadline) {
				t.Fatalf("database %s: %d outbox rows pending, %d parked 30 s after the load (%v)", db.key, last.Pending, last.Parked, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
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

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// The room notice worker reads every room database: a kick in a room of
// each database reaches its user as one room_notice.
func TestKickNoticesFromEveryRoomDatabase(t *testing.T) {
	mcfg, db := mysqltest.NewDatabase(t)
	_, dbB := mysqltest.NewDatabase(t)
	app, rc := startDevB(t, func(c *configs.Config) {
		withNotices(c)
		c.Store.Kind = configs.StoreMySQL
		c.MySQL.DSN = mcfg.DSN
		c.MySQL.RoomDatabase, c.MySQL.WalletDatabase, c.MySQL.NoticeDatabase = db, db, db
		c.MySQL.AutoMigrate = true
		c.MySQL.RoomDBs = map[string]configs.RoomDB{"b": {DSN: mcfg.DSN, Database: dbB}}
		c.MySQL.RoomShards = map[string][]string{"default": {"0-511"}, "b": {"512-1023"}}
		c.TencentIM.AllowFake = true
	})
	ctx := ctxT(t)
	rooms := append(roomsOn(1, 0, 511), roomsOn(1, 512, 1023)...)
	for _, r := range rooms {
		if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "sh", RoomId: r, UserId: r + "-owner", Name: "n"}); err != nil {
			t.Fatal(err)
		}
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: "sh", RoomId: r, UserId: r + "-bob"}); err != nil {
			t.Fatal(err)
		}
		if _, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "c3", AppCode: "sh", RoomId: r, UserId: r + "-owner", TargetUserId: r + "-bob", Reason: "spam"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rooms {
		waitUntil(t, 10*time.Second, r+"-bob's room_notice", func() bool { return len(app.fakeIM.C2CMessages(r+"-bob")) > 0 })
		time.Sleep(200 * time.Millisecond) // a second copy would come with the next scan
		n := 0
		for _, m := range app.fakeIM.C2CMessages(r + "-bob") {
			if m.Ext == "room_notice" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s-bob (room on database %s) got %d room_notice messages, want 1", r, app.roomShards.Key(app.roomShards.Index("sh/"+r)), n)
		}
	}
}

// A room database that does not answer when the node starts: the node
// starts and is ready (reporting the database degraded), the other
// database's rooms work, the absent database's rooms are refused at once
// with a retryable error naming it; once it answers it is migrated, its
// rooms work within seconds and its relay runs, and no acknowledged
// command is lost or doubled. The database is "down" behind a cut proxy
// to a private mariadbd (connections refused, as with a stopped server);
// its database is empty until the node migrates it. "stalled" is a
// server that accepts connections and never answers.
func TestRoomDatabaseDownAtStart(t *testing.T) {
	for _, mode := range []string{"refused", "stalled"} {
		t.Run(mode, func(t *testing.T) { testRoomDatabaseDownAtStart(t, mode == "stalled") })
	}
}

func testRoomDatabaseDownAtStart(t *testing.T, stalled bool) {
	srv := mysqltest.StartServer(t)
	_, dbB := mysqltest.NewDatabaseOn(t, srv.DSN)
	proxy := mysqltest.StartProxy(t, srv.DSN)
	if stalled {
		proxy.Stall()
	} else {
		proxy.Cut()
	}
	edit := twoDBConfig(t, proxy.DSN(), dbB)
	began := time.Now()
	app, rc := startDevB(t, edit)
	t.Logf("started in %v with database b down", time.Since(began).Round(time.Millisecond))
	if app.roomDBs[1].key != "b" || app.roomDBs[1].attached.Load() {
		t.Fatalf("database b attached at start though its server did not answer")
	}
	if slices.Contains(app.started, "worker room_outbox@b") || !slices.Contains(app.started, "worker room_outbox@default") {
		t.Fatalf("start steps %v: want default's relay started and b's waiting", app.started)
	}
	waitUntil(t, 5*time.Second, "/readyz ready and degraded by b", func() bool {
		code, body := opsGet(t, app, "/readyz")
		return code == 200 && strings.Contains(body, "degraded: room_db@b")
	})

	// purge status lists both databases' room tables; b's are marked.
	conn, err := grpc.NewClient(app.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	purgeLines := func() map[string]*v1.PurgeTableStatus {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := v1.NewPurgeAdminClient(conn).PurgeStatus(ctx, &v1.PurgeStatusRequest{})
		if err != nil {
			t.Fatalf("purge status: %v", err)
		}
		out := map[string]*v1.PurgeTableStatus{}
		for _, l := range r.GetTables() {
			out[l.GetRoomDb()+" "+l.GetTable()] = l
		}
		return out
	}
	lines := purgeLines()
	if l := lines["default room_outbox"]; l == nil || !l.GetHeld() || l.GetStatusError() != "" {
		t.Fatalf("purge status: default's room_outbox %v", l)
	}
	if l := lines["b room_outbox"]; l == nil || !l.GetHeld() || l.GetStatusError() == "" {
		t.Fatalf("purge status: b's room_outbox %v, want it listed and marked incomplete", l)
	}

	healthy, absent := roomsOn(3, 0, 511), roomsOn(3, 512, 1023)
	acks := map[string]map[string]int64{}
	cmd := func(roomID, id string, n int) (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if n == 0 {
			r, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: id, AppCode: "sh", RoomId: roomID, UserId: roomID + "-owner", Name: "n"})
			return r.GetRoomSeq(), err
		}
		r, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: id, AppCode: "sh", RoomId: roomID, UserId: fmt.Sprint(roomID, "-u", n)})
		return r.GetRoomSeq(), err
	}
	for _, r := range append(slices.Clone(healthy), absent...) {
		acks[r] = map[string]int64{}
	}
	for _, r := range healthy {
		for n := range 3 {
			id := fmt.Sprint("c", n)
			seq, err := cmd(r, id, n)
			if err != nil {
				t.Fatalf("room %s on the database that answers: %v", r, err)
			}
			acks[r][id] = seq
		}
	}
	for _, r := range absent {
		start := time.Now()
		_, err := cmd(r, "c0", 0)
		took := time.Since(start)
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `room database "b"`) {
			t.Fatalf("room %s on the absent database: %v, want Unavailable naming room database \"b\"", r, err)
		}
		if took > time.Second {
			t.Fatalf("room %s on the absent database refused after %v, want at once", r, took)
		}
	}

	tables := func() int {
		conn, err := sql.Open("mysql", srv.DSN+dbB)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var n int
		if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?", dbB).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := tables(); n != 0 {
		t.Fatalf("database b has %d tables before it came back", n)
	}

	// The database comes back: its rooms answer within seconds.
	proxy.Restore()
	back := time.Now()
	for _, r := range absent {
		for n := range 3 {
			id := fmt.Sprint("c", n)
			for {
				seq, err := cmd(r, id, n)
				if err == nil {
					acks[r][id] = seq
					break
				}
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("room %s after database b came back: %v", r, err)
				}
				if time.Since(back) > 15*time.Second {
					t.Fatalf("room %s still refused 15 s after database b came back: %v", r, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	t.Logf("database b's rooms answered %v after it came back", time.Since(back).Round(time.Millisecond))
	if took := time.Since(back); took > 8*time.Second {
		t.Errorf("database b's rooms took %v to answer after it came back, want a few seconds", took)
	}
	if n := tables(); n == 0 {
		t.Fatal("database b was not migrated when it came back")
	}
	if !hasSeries(t, app, "room_outbox_pending_total", "room_db", "b") {
		t.Fatal("database b's relay did not start when it came back")
	}
	if l := purgeLines()["b room_outbox"]; l == nil || l.GetStatusError() != "" || l.GetRowEstimate() == 0 && l.GetOldestCreatedAtMs() == 0 {
		t.Fatalf("purge status: b's room_outbox after it came back %v", l)
	}
	waitUntil(t, 5*time.Second, "/readyz ready without degradation", func() bool {
		code, body := opsGet(t, app, "/readyz")
		return code == 200 && strings.TrimSpace(body) == "ready"
	})

	// Every event of b reaches IM (its relay runs), and every
	// acknowledged command is in its room's log once.
	for _, d := range app.roomDBs {
		st := d.store.(interface {
			OutboxStats(context.Context) (persistence.OutboxStats, error)
		})
		waitUntil(t, 30*time.Second, d.key+"'s outbox drained", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := st.OutboxStats(ctx)
			return err == nil && s.Pending == 0 && s.Parked == 0
		})
	}
	for r, want := range acks {
		key := persistence.RoomKey{AppCode: "sh", RoomID: r}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		recs, err := app.roomStoreOf(key).LoadCommands(ctx, key, 0)
		cancel()
		if err != nil {
			t.Fatalf("log of %s: %v", r, err)
		}
		seen := map[string]int64{}
		for _, rec := range recs {
			if _, dup := seen[rec.CommandID]; dup {
				t.Errorf("room %s: %s twice in its log", r, rec.CommandID)
			}
			seen[rec.CommandID] = rec.Seq
		}
		if len(recs) != len(want) {
			t.Errorf("room %s: %d commands in its log, %d acknowledged", r, len(recs), len(want))
		}
		for id, seq := range want {
			if seen[id] != seq {
				t.Errorf("room %s: %s acknowledged at seq %d, log has %d", r, id, seq, seen[id])
			}
		}
	}
}

// One of two room databases paused (SIGSTOP of its own mariadbd): the
// other database's kicks still reach their users promptly, since the
// room notice worker scans each database on its own; after the resume a
// kick in the paused database's room is delivered too, and every kicked
// user gets exactly one room_notice.
func TestKickNoticesWhileOneRoomDatabaseIsPaused(t *testing.T) {
	srv := mysqltest.StartServer(t)
	_, dbB := mysqltest.NewDatabaseOn(t, srv.DSN)
	edit := twoDBConfig(t, srv.DSN, dbB)
	app, rc := startDevB(t, func(c *configs.Config) {
		edit(c)
		withNotices(c)
	})
	kickIn := func(roomID, user string) time.Time {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "create-" + user, AppCode: "sh", RoomId: roomID, UserId: roomID + "-owner", Name: "n"}); err != nil {
			t.Fatalf("create %s: %v", roomID, err)
		}
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "join-" + user, AppCode: "sh", RoomId: roomID, UserId: user}); err != nil {
			t.Fatalf("join %s: %v", roomID, err)
		}
		if _, err := rc.KickUser(ctx, &v1.KickUserRequest{CommandId: "kick-" + user, AppCode: "sh", RoomId: roomID, UserId: roomID + "-owner", TargetUserId: user, Reason: "spam"}); err != nil {
			t.Fatalf("kick in %s: %v", roomID, err)
		}
		return time.Now()
	}
	notices := func(user string) int {
		n := 0
		for _, m := range app.fakeIM.C2CMessages(user) {
			if m.Ext == "room_notice" {
				n++
			}
		}
		return n
	}
	onA, onB := roomsOn(4, 0, 511), roomsOn(2, 512, 1023)
	var users []string
	kickIn(onA[0], "a0-bob")
	kickIn(onB[0], "b0-bob")
	users = append(users, "a0-bob", "b0-bob")
	for _, u := range users {
		waitUntil(t, 10*time.Second, u+"'s room_notice", func() bool { return notices(u) > 0 })
	}

	srv.Pause()
	paused := time.Now()
	time.Sleep(500 * time.Millisecond) // the paused database's reads are hanging now
	for i, r := range onA[1:] {
		u := fmt.Sprint("a", i+1, "-bob")
		users = append(users, u)
		at := kickIn(r, u)
		waitUntil(t, 3*time.Second, u+"'s room_notice while the other database is paused", func() bool { return notices(u) > 0 })
		t.Logf("kick in a room of the database that answers: notice %v after the kick, %v into the other's pause",
			time.Since(at).Round(time.Millisecond), time.Since(paused).Round(time.Millisecond))
	}
	srv.Resume()

	// The paused database's room: a kick after the resume reaches its user.
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "create-b1-bob", AppCode: "sh", RoomId: onB[1], UserId: onB[1] + "-owner", Name: "n"})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("database b's room after the resume: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	kickIn(onB[1], "b1-bob")
	users = append(users, "b1-bob")
	waitUntil(t, 10*time.Second, "b1-bob's room_notice after the resume", func() bool { return notices("b1-bob") > 0 })
	time.Sleep(time.Second) // a second copy would come with the next scans
	for _, u := range users {
		if n := notices(u); n != 1 {
			t.Errorf("%s got %d room_notice messages, want 1", u, n)
		}
	}
}
