package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// Cycles of the benchmark's runs: each measures a calm window, then a
// window with database b paused (or not, in a control run), then lets
// the paused rooms recover and settle, unmeasured, before the next calm
// window.
const (
	benchCycles = 3
	benchCalm   = 10 * time.Second
	benchPause  = 10 * time.Second
	benchSettle = 10 * time.Second
)

// cyclesRun is one benchmark run: the healthy database's rooms'
// latencies in the calm windows and in the pause windows, pooled over
// the cycles and by cycle, and how long the paused rooms took to answer
// again after each resume.
type cyclesRun struct {
	calm, paused       []time.Duration // pooled, sorted
	calmBy, pausedBy   [][]time.Duration
	recovered          []time.Duration // < 0: not within 20 s
	pausedRoomsFailed  int
	healthyRoomsFailed int
}

// runCycles runs paced load on 6 rooms of each database for benchCycles
// cycles of calm (benchCalm), database b paused (benchPause; left
// running when pause is false) and recovery plus benchSettle. Pooling
// several calm and pause windows of one run, rather than one window
// before and one during, keeps a burst of the machine's other work from
// deciding the ratio on its own.
func runCycles(tb testing.TB, rc v1.RoomServiceClient, srv *mysqltest.Server, prefix string, pause bool) cyclesRun {
	tb.Helper()
	healthy, paused := roomsOn(6, 0, 511), roomsOn(6, 512, 1023)
	l, stop := startRoomLoad(tb, rc, prefix, append(slices.Clone(healthy), paused...))
	defer stop()
	time.Sleep(2 * time.Second) // warm: pools, grains
	var run cyclesRun
	for range benchCycles {
		t0 := time.Now()
		time.Sleep(benchCalm)
		if pause {
			srv.Pause()
		}
		tp := time.Now()
		time.Sleep(benchPause)
		if pause {
			srv.Resume()
		}
		tr := time.Now()
		run.calmBy = append(run.calmBy, l.window(healthy, t0, tp))
		run.pausedBy = append(run.pausedBy, l.window(healthy, tp, tr))
		recovered := l.waitBack(paused, tr)
		if recovered < 0 {
			tb.Fatalf("the paused database's rooms did not all answer within 20 s of its resume")
		}
		run.recovered = append(run.recovered, recovered)
		time.Sleep(benchSettle)
	}
	for i := range run.calmBy {
		run.calm, run.paused = append(run.calm, run.calmBy[i]...), append(run.paused, run.pausedBy[i]...)
	}
	slices.Sort(run.calm)
	slices.Sort(run.paused)
	run.pausedRoomsFailed, run.healthyRoomsFailed = sumFailed(l, paused), sumFailed(l, healthy)
	return run
}

// startRoomLoad creates rooms (command_id "create": a later run finds
// them created) and starts one paced client per room; stop ends them.
func startRoomLoad(tb testing.TB, rc v1.RoomServiceClient, prefix string, rooms []string) (l *roomLoad, stop func()) {
	tb.Helper()
	for _, r := range rooms {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "create", AppCode: "sh", RoomId: r, UserId: r + "-owner", Name: "n"})
		cancel()
		if err != nil {
			tb.Fatalf("create %s: %v", r, err)
		}
	}
	l = &roomLoad{rc: rc, prefix: prefix, acks: map[string]map[string]int64{}, lat: map[string][]sample{}, failed: map[string]int{}}
	for _, r := range rooms {
		l.acks[r] = map[string]int64{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range rooms {
		wg.Go(func() { l.run(ctx, r, perRoomInterval) })
	}
	return l, func() { cancel(); wg.Wait() }
}

// waitBack waits until every room acknowledged a command that ended
// after since (a paused database's rooms answer again) and returns how
// long after since that was; -1 when not within 20 s.
func (l *roomLoad) waitBack(rooms []string, since time.Time) time.Duration {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		back := 0
		for _, r := range rooms {
			if len(l.window([]string{r}, since, time.Now().Add(time.Hour))) > 0 {
				back++
			}
		}
		if back == len(rooms) {
			return time.Since(since)
		}
	}
	return -1
}

// p99Ratio is the pooled pause windows' p99 over the pooled calm
// windows'.
func (r cyclesRun) p99Ratio() float64 {
	return float64(pct(r.paused, .99)) / float64(max(pct(r.calm, .99), 1))
}

// byCycle formats each cycle's p99 calm → paused.
func (r cyclesRun) byCycle() string {
	s := ""
	for i := range r.calmBy {
		s += fmt.Sprintf(" %v→%v", pct(r.calmBy[i], .99).Round(time.Millisecond), pct(r.pausedBy[i], .99).Round(time.Millisecond))
	}
	return s
}

// BenchmarkTwoRoomDatabasesOnePaused is the target "one of two room
// databases paused: other rooms' command p99 ≤ 1.2× before". One
// process with two room databases, each on a private mariadbd, 12 rooms
// (6 on each) paced at 600 commands/s. Each iteration runs twice,
// interleaved: benchCycles cycles with database b SIGSTOPped benchPause
// per cycle, then a control run of the same schedule without the pause
// (its ratio is what the machine's own noise gives). Reported, for the
// healthy database's rooms: p99 over the pooled calm windows and over
// the pooled pause windows, their ratio, the control run's ratio, and
// how long the paused rooms took to answer again. Each iteration takes
// about 3½ minutes.
func BenchmarkTwoRoomDatabasesOnePaused(b *testing.B) {
	// The healthy rooms' database is on a mariadbd of its own as well:
	// the shared server carries the machine's other tests, whose bursts
	// would be measured as noise of this database.
	own := mysqltest.StartServer(b)
	b.Setenv(mysqltest.EnvDSN, own.DSN)
	_, rc, srv := twoRoomDBs(b)
	var ratio, control, before, during, recovered []float64
	i := 0
	for b.Loop() {
		for _, pause := range []bool{true, false} {
			run := runCycles(b, rc, srv, fmt.Sprintf("b%d%v", i, pause), pause)
			r := run.p99Ratio()
			b.Logf("run %d pause=%v: healthy rooms p99 calm %v (%d commands), paused-slot %v (%d) ×%.2f; by cycle%s; paused rooms back after %v; failed attempts: healthy rooms %d, paused rooms %d",
				i, pause, pct(run.calm, .99).Round(time.Millisecond), len(run.calm), pct(run.paused, .99).Round(time.Millisecond), len(run.paused), r,
				run.byCycle(), run.recovered, run.healthyRoomsFailed, run.pausedRoomsFailed)
			if pause {
				ratio, before, during = append(ratio, r), append(before, ms(pct(run.calm, .99))), append(during, ms(pct(run.paused, .99)))
				for _, d := range run.recovered {
					recovered = append(recovered, ms(d))
				}
				if run.healthyRoomsFailed > 0 {
					b.Fatalf("%d commands of the healthy database's rooms failed", run.healthyRoomsFailed)
				}
				if run.pausedRoomsFailed == 0 {
					b.Fatal("no command of the paused database's rooms failed: the pause did not reach them")
				}
			} else {
				control = append(control, r)
			}
		}
		i++
	}
	b.ReportMetric(median(before), "p99-before-ms")
	b.ReportMetric(median(during), "p99-during-ms")
	b.ReportMetric(median(ratio), "p99-ratio")
	b.ReportMetric(median(control), "control-p99-ratio")
	b.ReportMetric(median(recovered), "recover-ms")
}
