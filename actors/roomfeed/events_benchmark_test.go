package roomfeed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// BenchmarkCommandsBesideStuckWatchers: one room's commands, one after
// another, with 0 or 100 watchers that never read (their send blocks for
// good). Reported: the commands' p50 and p99. The room pushes each commit
// once to the node's feed, which never waits for a watcher: the stuck
// ones are cut when their buffer fills and cost the room nothing.
func BenchmarkCommandsBesideStuckWatchers(b *testing.B) {
	for _, watchers := range []int{0, 100} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			n := startEventsNode(b, nil, 0)
			w := &Watcher{Client: n.client}
			n.do(b, createCmd("r1", "c0"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			block := make(chan struct{})
			defer close(block)
			var started sync.WaitGroup
			for range watchers {
				started.Add(1)
				go func() {
					first := true
					_ = w.Watch(ctx, "app", "r1", 0, func(*v1.WatchRoomReply) error {
						if first {
							first = false
							started.Done()
						}
						<-block // never reads again
						return nil
					})
				}()
			}
			started.Wait()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				rc := joinCmd("r1", fmt.Sprint("c", i+1), "bob")
				if i%2 == 1 {
					rc = leaveCmd("r1", fmt.Sprint("c", i+1), "bob")
				}
				begin := time.Now()
				if _, err := n.client.Execute(ctx, rc); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(begin))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkListEventsVsGetRoom: 32 callers read one room of 1,000
// commands, with GetRoom or with ListRoomEvents of its last 100 events,
// through the cluster client (the server's part of the two RPCs; gRPC's
// cost is the same for both). Compare the ops/s of the two.
func BenchmarkListEventsVsGetRoom(b *testing.B) {
	n := startEventsNode(b, nil, 0)
	n.do(b, createCmd("r1", "c0"))
	for i := range 1000 {
		rc := joinCmd("r1", fmt.Sprint("c", i+1), "bob")
		if i%2 == 1 {
			rc = leaveCmd("r1", fmt.Sprint("c", i+1), "bob")
		}
		n.do(b, rc)
	}
	for _, read := range []string{"GetRoom", "ListRoomEvents100"} {
		b.Run(read, func(b *testing.B) {
			ctx := context.Background()
			var fails atomic.Int64
			b.SetParallelism(32 / runtime.GOMAXPROCS(0))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var err error
					if read == "GetRoom" {
						_, err = n.client.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "r1"}}})
					} else {
						var r *v1.ListRoomEventsReply
						r, err = n.client.ListEvents(ctx, &v1.ListRoomEventsRequest{AppCode: "app", RoomId: "r1", AfterRoomSeq: 901, Limit: 100})
						if err == nil && len(r.Events) != 100 {
							err = fmt.Errorf("%d events", len(r.Events))
						}
					}
					if err != nil {
						fails.Add(1)
					}
				}
			})
			if fails.Load() > 0 {
				b.Fatalf("%d reads failed", fails.Load())
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reads/s")
		})
	}
}

// BenchmarkIdleWatcherHeap: the memory of 2,000 idle watchers of one
// room (the node's part: the watcher, its buffer, the feed's entry, the
// goroutine that serves it), per watcher. A gRPC stream adds its own.
func BenchmarkIdleWatcherHeap(b *testing.B) {
	const watchers = 2000
	n := startEventsNode(b, nil, 0)
	w := &Watcher{Client: n.client}
	n.do(b, createCmd("r1", "c0"))
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		var started sync.WaitGroup
		before := memNow()
		for range watchers {
			started.Add(1)
			go func() {
				first := true
				_ = w.Watch(ctx, "app", "r1", 0, func(*v1.WatchRoomReply) error {
					if first {
						first = false
						started.Done()
					}
					return nil
				})
			}()
		}
		started.Wait()
		after := memNow()
		b.ReportMetric(float64(after.heap-before.heap)/watchers, "heap-B/watcher")
		b.ReportMetric(float64(after.stack-before.stack)/watchers, "stack-B/watcher")
		cancel()
	}
}

type memUse struct{ heap, stack uint64 }

func memNow() memUse {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memUse{m.HeapAlloc, m.StackInuse}
}

// BenchmarkHotRoomWatchers: one hot room on one node, written at a paced
// 3,000 events/s for 3 s (joins and leaves from 8 writers, one event a
// command), watched by 1,000 watchers on the same node (the Watcher that
// serves WatchRoom, default buffer) that read as they receive and, when
// cut or ended, watch again from the seq they were told, as the client
// protocol says. After the writes stop, every watcher must reach the
// head. Reported: the write rate reached, and over the watchers the
// least and the mean of distinct events received ÷ events written (the
// issue's figure, target 1.0), the cuts, and how long the last watcher
// took to reach the head after the last write. A gap or a repeat in any
// watcher's stream fails the run.
func BenchmarkHotRoomWatchers(b *testing.B) {
	for _, watchers := range hotWatchers() {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) { hotRoom(b, watchers) })
	}
}

func hotRoom(b *testing.B, watchers int) {
	const (
		writers  = 8
		rate     = 3000 // events/s
		writeFor = 3 * time.Second
	)
	for b.Loop() {
		n := startEventsNode(b, nil, 0)
		metrics, err := NewWatchMetrics(nil)
		if err != nil {
			b.Fatal(err)
		}
		w := &Watcher{Client: n.client, Metrics: metrics}
		start := n.do(b, createCmd("hot", "c0")).RoomSeq
		ctx, cancel := context.WithCancel(context.Background())
		type seen struct {
			last, events atomic.Int64
			bad          atomic.Value // string: the first gap or repeat
		}
		got := make([]*seen, watchers)
		var stopped sync.WaitGroup
		for i := range got {
			s := &seen{}
			s.last.Store(start)
			got[i] = s
			stopped.Add(1)
			go func() {
				defer stopped.Done()
				for ctx.Err() == nil {
					err := w.Watch(ctx, "app", "hot", s.last.Load(), func(r *v1.WatchRoomReply) error {
						if r.RoomSeq != s.last.Load()+1 && s.bad.Load() == nil {
							s.bad.Store(fmt.Sprintf("seq %d after %d", r.RoomSeq, s.last.Load()))
						}
						s.events.Add(int64(len(r.Events)))
						s.last.Store(r.RoomSeq)
						return nil
					})
					var ended *WatchEndedError
					if err != nil && !errors.As(err, &ended) && ctx.Err() == nil {
						b.Errorf("watch: %v", err)
						return
					}
				}
			}()
		}
		// Every watcher subscribed before the clock starts.
		for testutil.ToFloat64(metrics.Open) < float64(watchers) {
			time.Sleep(5 * time.Millisecond)
		}
		var writing sync.WaitGroup
		var failed atomic.Int64
		begin := time.Now()
		for k := range writers {
			writing.Add(1)
			go func() {
				defer writing.Done()
				every := time.Second * writers / rate
				next := time.Now()
				for i := 0; time.Since(begin) < writeFor; i++ {
					user := fmt.Sprint("u", k)
					rc := joinCmd("hot", fmt.Sprintf("w%d-%d", k, i), user)
					if i%2 == 1 {
						rc = leaveCmd("hot", fmt.Sprintf("w%d-%d", k, i), user)
					}
					if _, err := n.client.Execute(ctx, rc); err != nil {
						failed.Add(1)
					}
					next = next.Add(every)
					time.Sleep(time.Until(next))
				}
			}()
		}
		writing.Wait()
		wrote := time.Since(begin)
		if failed.Load() > 0 {
			b.Fatalf("%d writes failed", failed.Load())
		}
		head := n.do(b, &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "app", RoomId: "hot"}}}).RoomSeq
		written := head - start
		deadline := time.Now().Add(60 * time.Second)
		for {
			behind := 0
			for _, s := range got {
				if s.last.Load() < head {
					behind++
				}
			}
			if behind == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		caughtUp := time.Since(begin) - wrote
		cancel()
		stopped.Wait()
		least, sum := 0.0, 0.0
		if watchers > 0 {
			least = 1e9
		}
		for i, s := range got {
			if bad := s.bad.Load(); bad != nil {
				b.Fatalf("watcher %d: %s", i, bad)
			}
			r := float64(s.events.Load()) / float64(written)
			least, sum = min(least, r), sum+r
		}
		b.ReportMetric(float64(written)/wrote.Seconds(), "written-events/s")
		b.ReportMetric(least, "min-received/written")
		b.ReportMetric(sum/float64(max(watchers, 1)), "mean-received/written")
		b.ReportMetric(testutil.ToFloat64(metrics.Cuts), "cuts")
		b.ReportMetric(float64(caughtUp.Milliseconds()), "catch-up-ms")
	}
}

// hotWatchers: the watcher counts of BenchmarkHotRoomWatchers;
// ROOMCELL_HOT_WATCHERS="100,300" runs others.
func hotWatchers() []int {
	env := os.Getenv("ROOMCELL_HOT_WATCHERS")
	if env == "" {
		return []int{0, 1000}
	}
	var out []int
	for _, f := range strings.Split(env, ",") {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}
