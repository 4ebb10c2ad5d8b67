package purge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyapp/roomcell/actors/supervise"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/internal/logtest"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

// fastConfig purges at once and without pauses worth measuring.
func fastConfig(batch int) configs.RetentionConfig {
	return configs.WithDefaults(configs.RetentionConfig{OutboxPublished: time.Minute, CommandLog: time.Minute, WalletOutbox: time.Minute,
		NoticesDelivered: time.Minute, BatchSize: batch, BatchPause: time.Microsecond, RowsPerSecond: 1 << 30, Interval: time.Hour})
}

// seedRoom appends n commands of key (one event each) at t0+i ms, marks
// every event except each fourth published, and snapshots at snapSeq.
func seedRoom(t *testing.T, s persistence.Store, key persistence.RoomKey, n int, t0, snapSeq int64) (pending []string) {
	t.Helper()
	for i := 1; i <= n; i++ {
		seq := int64(i)
		id := fmt.Sprintf("%s-e%d", key, seq)
		c := persistence.CommandRecord{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, CommandID: fmt.Sprintf("c%d", seq),
			CommandType: "JoinRoom", Reply: []byte("r"), CreatedAtMs: t0 + seq,
			Events: []persistence.Envelope{{EventID: id, EventType: "RoomUserJoined", AppCode: key.AppCode, RoomID: key.RoomID,
				RoomSeq: seq, CommandID: fmt.Sprintf("c%d", seq), CreatedAtMs: t0 + seq, Payload: []byte(`{}`)}}}
		a := persistence.Append{Command: c}
		if seq == snapSeq {
			a.Snapshot = &persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, State: []byte("s"), UpdatedAtMs: t0 + seq}
		}
		if err := s.Append(t.Context(), a); err != nil {
			t.Fatalf("append: %v", err)
		}
		if i%4 == 0 {
			pending = append(pending, id)
			continue
		}
		if err := s.MarkOutboxPublished(t.Context(), id, t0+seq); err != nil {
			t.Fatalf("mark: %v", err)
		}
	}
	return pending
}

func TestRoundPurgesInBatchesAndCountsRows(t *testing.T) {
	store := memdb.New()
	now := time.UnixMilli(2_000_000_000_000)
	old := now.Add(-time.Hour).UnixMilli()
	key := persistence.RoomKey{AppCode: "a", RoomID: "r"}
	pending := seedRoom(t, store, key, 40, old, 30)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(Deps{Purgers: []persistence.Purger{store}, Config: fastConfig(7), NodeID: "n1", Logger: quiet,
		Metrics: m, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]TableRound{}
	for _, tr := range svc.Round(t.Context()) {
		got[tr.Table] = tr
	}
	// 30 published rows (40 minus 10 pending) and log rows 1..30.
	if tr := got[persistence.PurgeRoomOutbox]; tr.Rows != 30 || !tr.Done || tr.Batches < 30/7 || tr.Err != nil {
		t.Fatalf("room_outbox round %+v", tr)
	}
	if tr := got[persistence.PurgeCommandLog]; tr.Rows != 30 || !tr.Done || tr.Batches < 30/7 || tr.Err != nil {
		t.Fatalf("room_command_log round %+v", tr)
	}
	if _, ok := got[persistence.PurgeWalletOutbox]; ok {
		t.Fatalf("a table no store here holds was visited")
	}
	if v := metricValue(t, m.RowsPurged.WithLabelValues(persistence.PurgeRoomOutbox)); v != 30 {
		t.Fatalf("rows purged metric %v", v)
	}
	if v := metricValue(t, m.RowEstimate.WithLabelValues(persistence.PurgeRoomOutbox)); v != float64(len(pending)) {
		t.Fatalf("row estimate %v, want %d", v, len(pending))
	}
	if v := metricValue(t, m.OldestAge.WithLabelValues(persistence.PurgeCommandLog)); v != float64(now.UnixMilli()-(old+31))/1000 {
		t.Fatalf("oldest log row age %v", v)
	}
	for _, id := range pending {
		if row, err := store.GetOutbox(t.Context(), id); err != nil || row.Status != persistence.OutboxPending {
			t.Fatalf("pending row %s: %+v %v", id, row, err)
		}
	}
	// Status and the dry run agree with what is left.
	reps, err := svc.Status(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, rep := range reps {
		switch rep.Table {
		case persistence.PurgeRoomOutbox, persistence.PurgeCommandLog:
			if !rep.Held || rep.Purgeable != 0 || rep.Last.Rows != 30 {
				t.Fatalf("status %+v", rep)
			}
		default:
			if rep.Held || rep.Purgeable != -1 {
				t.Fatalf("status of a table not held here: %+v", rep)
			}
		}
	}
}

// concurrencyProbe wraps a Purger and records how many Purge calls of one
// table ever ran at the same time.
type concurrencyProbe struct {
	persistence.Purger
	mu      sync.Mutex
	running map[string]int
	most    int
	calls   atomic.Int64
}

func (p *concurrencyProbe) Purge(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	p.mu.Lock()
	p.running[r.Table]++
	p.most = max(p.most, p.running[r.Table])
	p.mu.Unlock()
	p.calls.Add(1)
	time.Sleep(200 * time.Microsecond) // widen the window two purgers would share
	res, err := p.Purger.Purge(ctx, r)
	p.mu.Lock()
	p.running[r.Table]--
	p.mu.Unlock()
	return res, err
}

// Three nodes over one store, rounds back to back: never two purges of one
// table at once, and some rounds find the lease taken.
func TestNodesNeverPurgeOneTableAtOnce(t *testing.T) {
	forBackends(t, func(t *testing.T, store persistence.Store, p persistence.Purger) {
		probe := &concurrencyProbe{Purger: p, running: map[string]int{}}
		now := time.Now()
		var skipped atomic.Int64
		var writer, nodes sync.WaitGroup
		stop := make(chan struct{})
		// A writer keeps adding rows to purge.
		writer.Add(1)
		go func() {
			defer writer.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				seedRoom(t, store, persistence.RoomKey{AppCode: "a", RoomID: fmt.Sprintf("w%d", i)}, 8, now.Add(-time.Hour).UnixMilli(), 6)
			}
		}()
		for n := range 3 {
			cfg := fastConfig(3)
			cfg.Interval = 20 * time.Millisecond // a round's budget per table: the writer never lets it finish
			svc, err := NewService(Deps{Purgers: []persistence.Purger{probe}, Config: cfg, NodeID: fmt.Sprint("node-", n),
				Logger: quiet, Now: time.Now})
			if err != nil {
				t.Fatal(err)
			}
			nodes.Add(1)
			go func() {
				defer nodes.Done()
				for range 15 {
					for _, tr := range svc.Round(t.Context()) {
						if tr.Err != nil {
							t.Errorf("round: %v", tr.Err)
						}
						if tr.Skipped != "" {
							skipped.Add(1)
						}
					}
				}
			}()
		}
		nodes.Wait()
		close(stop)
		writer.Wait()
		if probe.calls.Load() < 10 {
			t.Fatalf("only %d purge batches ran", probe.calls.Load())
		}
		if probe.most != 1 {
			t.Fatalf("%d purges of one table ran at once", probe.most)
		}
		if skipped.Load() == 0 {
			t.Fatalf("no round ever found the lease taken: the test did not contend")
		}
	})
}

// forBackends runs fn on a go-memdb store and on a MariaDB one.
func forBackends(t *testing.T, fn func(t *testing.T, s persistence.Store, p persistence.Purger)) {
	t.Run("memdb", func(t *testing.T) {
		s := memdb.New()
		fn(t, s, s)
	})
	t.Run("mariadb", func(t *testing.T) {
		cfg, _ := mysqltest.NewDatabase(t)
		s, err := mysql.Open(t.Context(), cfg, mysql.WithLogger(quiet))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		fn(t, s, s)
	})
}

// Hot rooms: clients append and the relay marks rows published while the
// purge runs with a retention shorter than the test. Afterwards every row
// never published is still there and pending, and every room's log after
// its snapshot is complete (recovery reads what the writers wrote).
func TestPurgeUnderLoadLosesNothingLive(t *testing.T) {
	forBackends(t, func(t *testing.T, store persistence.Store, p persistence.Purger) {
		ctx := t.Context()
		cfg := fastConfig(50)
		cfg.Interval = 50 * time.Millisecond // per-table budget of a round
		// The purge's clock runs 2 minutes ahead: everything older than the
		// last second is out of the window, the hardest setting.
		svc, err := NewService(Deps{Purgers: []persistence.Purger{p}, Config: cfg, NodeID: "n", Logger: quiet,
			Now: func() time.Time { return time.Now().Add(2*time.Minute - time.Second) }})
		if err != nil {
			t.Fatal(err)
		}
		const rooms, perRoom = 6, 60
		var (
			mu         sync.Mutex
			neverMarks []string
			snapSeq    = map[string]int64{}
		)
		var wg sync.WaitGroup
		for r := range rooms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := persistence.RoomKey{AppCode: "hot", RoomID: fmt.Sprint("room-", r)}
				for seq := int64(1); seq <= perRoom; seq++ {
					at := time.Now().UnixMilli()
					id := fmt.Sprintf("%s-%d", key, seq)
					a := persistence.Append{Command: persistence.CommandRecord{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq,
						CommandID: fmt.Sprint("c", seq), CommandType: "JoinRoom", Reply: []byte("r"), CreatedAtMs: at,
						Events: []persistence.Envelope{{EventID: id, EventType: "RoomUserJoined", AppCode: key.AppCode, RoomID: key.RoomID,
							RoomSeq: seq, CreatedAtMs: at, Payload: []byte(`{}`)}}}}
					if seq%7 == 0 {
						a.Snapshot = &persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID, Seq: seq, State: []byte("s"), UpdatedAtMs: at}
					}
					if err := store.Append(ctx, a); err != nil {
						t.Errorf("append %s: %v", id, err)
						return
					}
					if a.Snapshot != nil {
						mu.Lock()
						snapSeq[key.RoomID] = seq
						mu.Unlock()
					}
					if seq%3 == 0 {
						mu.Lock()
						neverMarks = append(neverMarks, id)
						mu.Unlock()
					} else if err := store.MarkOutboxPublished(ctx, id, at); err != nil {
						t.Errorf("mark %s: %v", id, err)
					}
				}
			}()
		}
		writersDone := make(chan struct{})
		go func() {
			wg.Wait()
			close(writersDone)
		}()
		var purged atomic.Int64
		for stop := false; !stop; {
			select {
			case <-writersDone:
				stop = true
			default:
			}
			for _, tr := range svc.Round(ctx) {
				if tr.Err != nil {
					t.Errorf("round: %v", tr.Err)
				}
				purged.Add(tr.Rows)
			}
		}
		svc.Round(ctx) // one more after the writers stopped
		if purged.Load() == 0 {
			t.Fatalf("the purge deleted nothing: the test did not race it")
		}
		for _, id := range neverMarks {
			row, err := store.GetOutbox(ctx, id)
			if err != nil || row.Status != persistence.OutboxPending {
				t.Fatalf("pending row %s: %+v, %v", id, row, err)
			}
		}
		for r := range rooms {
			key := persistence.RoomKey{AppCode: "hot", RoomID: fmt.Sprint("room-", r)}
			snap, err := store.LoadSnapshot(ctx, key)
			if err != nil || snap.Seq != snapSeq[key.RoomID] {
				t.Fatalf("%s snapshot %+v, %v; want seq %d", key, snap, err, snapSeq[key.RoomID])
			}
			recs, err := store.LoadCommands(ctx, key, snap.Seq)
			if err != nil || int64(len(recs)) != perRoom-snap.Seq {
				t.Fatalf("%s: %d commands after snapshot %d, %v", key, len(recs), snap.Seq, err)
			}
			all, _ := store.LoadCommands(ctx, key, 0)
			if len(all) > 0 && all[0].Seq > snap.Seq+1 {
				t.Fatalf("%s: log starts at %d after snapshot %d", key, all[0].Seq, snap.Seq)
			}
		}
	})
}

// The actor runs a round at start and stops promptly.
func TestWorkerStartsAndStops(t *testing.T) {
	store := memdb.New()
	now := time.Now()
	seedRoom(t, store, persistence.RoomKey{AppCode: "a", RoomID: "r"}, 20, now.Add(-time.Hour).UnixMilli(), 20)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	sup, err := supervise.NewSupervisor(sys, "workers", actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(5)
	cfg.BatchPause = 10 * time.Millisecond
	w, err := Start(sup, Deps{Purgers: []persistence.Purger{store}, Config: cfg, NodeID: "n", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, err := store.LoadCommands(t.Context(), persistence.RoomKey{AppCode: "a", RoomID: "r"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker left %d log rows", len(left))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := w.Stop(5 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := Start(sup, Deps{Config: configs.WithDefaults(configs.RetentionConfig{BatchSize: 5000})}); err == nil {
		t.Fatalf("a bad retention block started")
	}
	// The section is taken as given: an unset key is refused by name, not
	// defaulted a second time.
	unset := configs.WithDefaults(configs.RetentionConfig{})
	unset.Interval = 0
	if _, err := NewService(Deps{Config: unset}); err == nil || !strings.Contains(err.Error(), "retention.interval") {
		t.Fatalf("an unset retention.interval: %v, want an error naming it", err)
	}
}

// The rate holds from the first batch: with rows_per_second 400 and
// batches of 100, 501 rows take at least 1.25 s.
func TestRoundHonoursTheRate(t *testing.T) {
	store := memdb.New()
	now := time.Now()
	seedRoom(t, store, persistence.RoomKey{AppCode: "a", RoomID: "r"}, 668, now.Add(-time.Hour).UnixMilli(), 0) // 501 published rows
	cfg := fastConfig(100)
	cfg.RowsPerSecond = 400
	svc, err := NewService(Deps{Purgers: []persistence.Purger{store}, Config: cfg, NodeID: "n", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var rows int64
	for _, tr := range svc.Round(t.Context()) {
		rows += tr.Rows
	}
	// 501 rows at 400/s from an empty bucket: the waits before the last
	// five batches pay for 500 rows, 1.25 s (a full initial bucket would
	// have let the first 100 go free: 1 s).
	if took := time.Since(start); rows != 501 || took < 1200*time.Millisecond {
		t.Fatalf("purged %d rows in %s; want 501 rows in at least 1.2s", rows, took)
	}
	// The debt outlives the round. Rounds that each end after one batch
	// (a 1 ns budget) still pay for it: three rounds of 100 rows from an
	// empty bucket wait for the first two batches, 0.5 s.
	seedRoom(t, store, persistence.RoomKey{AppCode: "a", RoomID: "r2"}, 400, now.Add(-time.Hour).UnixMilli(), 0) // 300 published
	cfg.Interval = time.Nanosecond
	svc, err = NewService(Deps{Purgers: []persistence.Purger{store}, Config: cfg, NodeID: "n", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	rows = 0
	for range 3 {
		for _, tr := range svc.Round(t.Context()) {
			rows += tr.Rows
		}
	}
	if took := time.Since(start); rows != 300 || took < 450*time.Millisecond {
		t.Fatalf("three rounds purged %d rows in %s; want 300 rows in at least 0.45s", rows, took)
	}
}

// slowPurger makes every batch take at least delay, as a database busy
// with room commands would, and adds up the time spent in batches.
type slowPurger struct {
	persistence.Purger
	delay time.Duration
	busy  time.Duration
	calls int
}

func (p *slowPurger) Purge(ctx context.Context, r persistence.PurgeRequest) (persistence.PurgeResult, error) {
	t0 := time.Now()
	time.Sleep(p.delay)
	res, err := p.Purger.Purge(ctx, r)
	p.busy += time.Since(t0)
	p.calls++
	return res, err
}

// The purge spends at most retention.duty_cycle of the wall time in its
// batches, whatever a batch costs: slower batches (a busy database) mean
// fewer of them, and duty_cycle 1 turns the yield off.
func TestRoundYieldsToASlowStore(t *testing.T) {
	for _, tc := range []struct {
		delay     time.Duration
		duty      float64
		low, high float64 // bounds of the busy share of the round
	}{
		// The last batch's yield is still running when the loop stops:
		// n batches in n-1 cycles, so the bound is duty*n/(n-1).
		{20 * time.Millisecond, 0.1, 0.05, 0.115},
		{2 * time.Millisecond, 0.1, 0.05, 0.105},
		{10 * time.Millisecond, 0.25, 0.15, 0.26},
		{10 * time.Millisecond, 1, 0.6, 1},
	} {
		store := memdb.New()
		now := time.Now()
		seedRoom(t, store, persistence.RoomKey{AppCode: "a", RoomID: "r"}, 8000, now.Add(-time.Hour).UnixMilli(), 0)
		slow := &slowPurger{Purger: store, delay: tc.delay}
		cfg := fastConfig(10)
		cfg.DutyCycle, cfg.Interval = tc.duty, time.Second
		svc, err := NewService(Deps{Purgers: []persistence.Purger{slow}, Config: cfg, NodeID: "n", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		// Rounds back to back for 2 s (each ends after its 1 s budget):
		// the yield after a round's last batch delays the next round's
		// first, so the share holds across rounds too.
		start := time.Now()
		var rows int64
		for time.Since(start) < 2*time.Second {
			for _, tr := range svc.Round(t.Context()) {
				if tr.Err != nil {
					t.Fatal(tr.Err)
				}
				rows += tr.Rows
			}
		}
		took := time.Since(start)
		share := slow.busy.Seconds() / took.Seconds()
		t.Logf("delay %s duty %.2f: %d batches, %d rows in %s, busy %.3f of the time", tc.delay, tc.duty, slow.calls, rows, took.Round(time.Millisecond), share)
		if share < tc.low || share > tc.high {
			t.Errorf("delay %s duty %.2f: busy %.3f of the round, want %.2f..%.2f", tc.delay, tc.duty, share, tc.low, tc.high)
		}
		if rows == 0 {
			t.Errorf("delay %s: nothing purged", tc.delay)
		}
	}
}

func TestYieldAfter(t *testing.T) {
	for _, tc := range []struct {
		took time.Duration
		duty float64
		want time.Duration
	}{
		{100 * time.Millisecond, 0.1, 900 * time.Millisecond},
		{100 * time.Millisecond, 0.5, 100 * time.Millisecond},
		{100 * time.Millisecond, 1, 0},
		{0, 0.1, 0},
		{-time.Second, 0.1, 0},
	} {
		if got := YieldAfter(tc.took, tc.duty); got != tc.want {
			t.Errorf("YieldAfter(%s, %v) = %s, want %s", tc.took, tc.duty, got, tc.want)
		}
	}
}

// A table whose rounds end with rows still eligible while its oldest row
// is past twice the retention is said to fall behind, once per ten
// minutes; a purge that keeps up says nothing.
func TestFallingBehindIsLoggedOncePerTenMinutes(t *testing.T) {
	store := memdb.New()
	clock := time.UnixMilli(2_000_000_000_000)
	seedRoom(t, store, persistence.RoomKey{AppCode: "a", RoomID: "r"}, 200, clock.Add(-time.Hour).UnixMilli(), 0)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	cfg := fastConfig(10)
	cfg.Interval = time.Nanosecond // one batch per round: a backlog stays
	// The clock moves a millisecond a reading, so a round's budget ends.
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	svc, err := NewService(Deps{Purgers: []persistence.Purger{store}, Config: cfg, NodeID: "n1", Metrics: m,
		Logger: slog.New(slog.NewTextHandler(&buf, nil)), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		svc.Round(t.Context())
	}
	if n := strings.Count(buf.String(), "purge is falling behind"); n != 1 {
		t.Fatalf("3 rounds behind within a minute logged %d warnings, want 1:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "table=room_outbox") || !strings.Contains(buf.String(), "oldest_row_age=1h") {
		t.Fatalf("warning lacks the table or the age:\n%s", buf.String())
	}
	clock = clock.Add(11 * time.Minute)
	svc.Round(t.Context())
	if n := strings.Count(buf.String(), "purge is falling behind"); n != 2 {
		t.Fatalf("after ten minutes: %d warnings, want 2", n)
	}
	// Caught up: the rounds end Done and nothing more is said.
	cfg.Interval = time.Hour
	svc, err = NewService(Deps{Purgers: []persistence.Purger{store}, Config: cfg, NodeID: "n1", Metrics: m,
		Logger: slog.New(slog.NewTextHandler(&buf, nil)), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	before := buf.String()
	for _, tr := range svc.Round(t.Context()) {
		if !tr.Done {
			t.Fatalf("round of %s did not finish: %+v", tr.Table, tr)
		}
	}
	if strings.Contains(strings.TrimPrefix(buf.String(), before), "falling behind") {
		t.Fatalf("a purge that kept up warned:\n%s", buf.String())
	}
}

// syncBuffer is a log sink the logging goroutines write while the test reads.
type syncBuffer = logtest.Buffer
