package purge

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// BenchmarkPurgeUnderLoad is the MariaDB measurement: room_outbox
// and room_command_log seeded with ROOMCELL_PURGE_BENCH_ROWS rows each
// (default 100000, the bounded form `make bench` runs; the run
// uses 2000000), all past retention; then windows of
// ROOMCELL_PURGE_BENCH_WINDOW (default 3s), ROOMCELL_PURGE_BENCH_ROUNDS
// rounds (default 2) of them in rotated order, alternate between no purge,
// the purge without its yield (retention.duty_cycle 1) at 250 and 5000
// rows_per_second, the default (5000 rows/s, duty_cycle 0.1), duty_cycle
// 0.05, the default with batches of 200, and the purge unthrottled (rows_per_second 10^6, no yield, 20 ms
// pauses), while 16 writers append room commands (command log row + outbox
// row, a snapshot every 20) as room grains do. It reports each mode's
// commands/s and p50/p99 append latency, measured in the same run, and the
// purge's rows/s; then one window of each purge mode with no writers (the
// purge's rate on an idle server). ROOMCELL_PURGE_BENCH_MODES=a,b picks
// modes by name. Run with -benchtime 1x: one experiment per run.
func BenchmarkPurgeUnderLoad(b *testing.B) {
	rows := envInt("ROOMCELL_PURGE_BENCH_ROWS", 100_000)
	window := time.Duration(envInt("ROOMCELL_PURGE_BENCH_WINDOW", 3)) * time.Second
	rounds := envInt("ROOMCELL_PURGE_BENCH_ROUNDS", 2)
	cfg, _ := mysqltest.NewDatabase(b)
	store, err := mysql.Open(context.Background(), cfg, mysql.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	seedStart := time.Now()
	seedBench(b, store, rows)
	b.Logf("seeded %d outbox + %d log rows in %s", rows, rows, time.Since(seedStart).Round(time.Second))

	type mode struct {
		name  string
		rate  int     // 0: no purge
		duty  float64 // retention.duty_cycle (1: no yield)
		batch int     // retention.batch_size (0: the default)
	}
	modes := []mode{{"off", 0, 1, 0}, {"rate-250", 250, 1, 0}, {"rate-5000", 5000, 1, 0},
		{"default", 5000, configs.DefaultDutyCycle, 0}, {"duty-0.05", 5000, 0.05, 0}, {"batch-200", 5000, configs.DefaultDutyCycle, 200}}
	modes = append(modes, mode{"unthrottled", 1_000_000, 1, 0})
	// ROOMCELL_PURGE_BENCH_MODES (comma-separated names) runs a subset;
	// "off" always runs, the ratios need it.
	if only := os.Getenv("ROOMCELL_PURGE_BENCH_MODES"); only != "" {
		want := strings.Split(only, ",")
		modes = slices.DeleteFunc(modes, func(m mode) bool { return m.name != "off" && !slices.Contains(want, m.name) })
	}
	type stats struct {
		lat     []time.Duration
		cmds    int64
		elapsed time.Duration
		purged  int64
		// per round: commands/s and p99 of this mode's window
		roundCPS, roundP99 []float64
	}
	res := map[string]*stats{}
	var seq atomic.Int64
	b.ResetTimer()
	for range b.N {
		for round := range rounds {
			// Each round starts at the next mode, so a load that rises or
			// falls during the run (a shared machine) does not always
			// land on the same mode.
			for i := range modes {
				m := modes[(i+round)%len(modes)]
				st := res[m.name]
				if st == nil {
					st = &stats{}
					res[m.name] = st
				}
				lat, cmds, purged, el := benchWindow(b, store, m.rate, m.duty, m.batch, 16, window, &seq)
				st.lat = append(st.lat, lat...)
				st.cmds += cmds
				st.purged += purged
				st.elapsed += el
				slices.Sort(lat)
				st.roundCPS = append(st.roundCPS, float64(cmds)/el.Seconds())
				st.roundP99 = append(st.roundP99, ms(pct(lat, 99)))
			}
		}
	}
	b.StopTimer()
	base := res["off"]
	// The ratios are medians over rounds of a mode's window against the
	// same round's "off" window: windows a minute apart on a shared
	// machine differ more than the purge does.
	ratio := func(xs, base []float64) float64 {
		rs := make([]float64, len(xs))
		for i := range xs {
			rs[i] = xs[i] / base[i]
		}
		slices.Sort(rs)
		return rs[len(rs)/2]
	}
	// The purge alone, no writers: what each purge mode does on an idle
	// server (the rate cap, not the yield, bounds it there).
	for _, m := range modes[1:] {
		_, _, purged, el := benchWindow(b, store, m.rate, m.duty, m.batch, 0, window, &seq)
		b.Logf("%-12s idle server: purge rows/s %7.0f", m.name, float64(purged)/el.Seconds())
	}
	for _, m := range modes {
		st := res[m.name]
		slices.Sort(st.lat)
		p50, p99 := pct(st.lat, 50), pct(st.lat, 99)
		cps := float64(st.cmds) / st.elapsed.Seconds()
		b.Logf("%-12s commands/s %7.0f (median round %.2fx off)  p50 %6.2fms  p99 %6.2fms (median round %.2fx off)  purge rows/s %7.0f",
			m.name, cps, ratio(st.roundCPS, base.roundCPS), ms(p50), ms(p99), ratio(st.roundP99, base.roundP99),
			float64(st.purged)/st.elapsed.Seconds())
		b.ReportMetric(cps, m.name+"_cmds/s")
		b.ReportMetric(ms(p99), m.name+"_p99_ms")
		if m.rate > 0 {
			b.ReportMetric(float64(st.purged)/st.elapsed.Seconds(), m.name+"_purged_rows/s")
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// seedBench writes n published room_outbox rows and n command log rows
// (1000 rooms, each with a snapshot at its last seq), all a week old, in
// multi-row INSERTs on four connections.
func seedBench(b *testing.B, store *mysql.Store, n int) {
	old := time.Now().Add(-8 * 24 * time.Hour).UnixMilli()
	const perStmt = 1000
	rooms := 1000
	perRoom := max(1, n/rooms)
	jobs := make(chan func() error, 64)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := j(); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	db := store.DB()
	for start := 0; start < n; start += perStmt {
		end := min(n, start+perStmt)
		jobs <- func() error {
			var sb strings.Builder
			sb.WriteString("INSERT INTO room_outbox (event_id, app_code, room_id, room_seq, event_type, envelope, status, created_at_ms, updated_at_ms, published_at_ms) VALUES ")
			for i := start; i < end; i++ {
				if i > start {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, "('seed-%d','bench','seed-%d',%d,'RoomUserJoined','{}','published',%d,%d,%d)", i, i%rooms, i/rooms+1, old+int64(i), old+int64(i), old+int64(i))
			}
			_, err := db.Exec(sb.String())
			return err
		}
		jobs <- func() error {
			var sb strings.Builder
			sb.WriteString("INSERT INTO room_command_log (app_code, room_id, seq, command_id, command_type, reply, events, created_at_ms) VALUES ")
			for i := start; i < end; i++ {
				if i > start {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, "('bench','seed-%d',%d,'c%d','JoinRoom','r','[]',%d)", i%rooms, i/rooms+1, i, old+int64(i))
			}
			_, err := db.Exec(sb.String())
			return err
		}
	}
	jobs <- func() error {
		var sb strings.Builder
		sb.WriteString("INSERT INTO room_snapshots (app_code, room_id, seq, state, updated_at_ms) VALUES ")
		for r := range rooms {
			if r > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "('bench','seed-%d',%d,'s',%d)", r, perRoom+1, old)
		}
		_, err := db.Exec(sb.String())
		return err
	}
	close(jobs)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatalf("seed: %v", err)
	}
	if _, err := db.Exec("ANALYZE TABLE room_outbox, room_command_log"); err != nil {
		b.Fatalf("analyze: %v", err)
	}
}

// benchWindow runs 16 appending writers for d, with a purge worker's
// rounds at rate rows/s beside them when rate > 0.
func benchWindow(b *testing.B, store *mysql.Store, rate int, duty float64, batch, writers int, d time.Duration, seq *atomic.Int64) (lat []time.Duration, cmds, purged int64, elapsed time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var purgeDone chan struct{}
	if rate > 0 {
		svc, err := NewService(Deps{Purgers: []persistence.Purger{store}, NodeID: "bench", Logger: quiet,
			// A 1 s budget per table: both tables get their turn in a window.
			Config: configs.WithDefaults(configs.RetentionConfig{RowsPerSecond: rate, DutyCycle: duty, BatchSize: batch, Interval: time.Second})})
		if err != nil {
			b.Fatal(err)
		}
		purgeDone = make(chan struct{})
		go func() {
			defer close(purgeDone)
			for ctx.Err() == nil {
				for _, tr := range svc.Round(ctx) {
					purged += tr.Rows
				}
			}
		}()
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := persistence.RoomKey{AppCode: "bench", RoomID: fmt.Sprintf("live-%d-%d", w, seq.Add(1))}
			var mine []time.Duration
			for s := int64(1); ctx.Err() == nil; s++ {
				now := time.Now().UnixMilli()
				id := fmt.Sprintf("%s-%d", key.RoomID, s)
				a := persistence.Append{Command: persistence.CommandRecord{AppCode: key.AppCode, RoomID: key.RoomID, Seq: s,
					CommandID: id, CommandType: "JoinRoom", Reply: []byte("r"), CreatedAtMs: now,
					Events: []persistence.Envelope{{EventID: id, EventType: "RoomUserJoined", AppCode: key.AppCode, RoomID: key.RoomID,
						RoomSeq: s, CommandID: id, CreatedAtMs: now, Payload: []byte(`{"user_id":"u"}`)}}}}
				if s%20 == 0 {
					a.Snapshot = &persistence.Snapshot{AppCode: key.AppCode, RoomID: key.RoomID, Seq: s, State: []byte("state"), UpdatedAtMs: now}
				}
				t0 := time.Now()
				if err := store.Append(context.Background(), a); err != nil {
					b.Errorf("append: %v", err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	if writers == 0 {
		<-ctx.Done()
	}
	wg.Wait()
	elapsed = time.Since(start)
	if purgeDone != nil {
		<-purgeDone
	}
	return lat, int64(len(lat)), purged, elapsed
}
