package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
)

// BenchmarkListRoomEventsVsGetRoomOverGRPC is deploy/local/events-ratio.sh
// with a compiled client instead of ghz: one room of 1,000 join/leave
// commits, then b.N GetRoom and b.N ListRoomEvents of the 100 events
// after seq 900, each by 32 callers over loopback gRPC, in one run. The
// client decodes with generated code (ghz decodes dynamically, and that,
// not the server, set ghz's pace), so the ratio is nearer the server's.
// On a shared machine the rates swing with the neighbours' load; the CPU
// the process (client and server) spent per call is steadier, and its
// ratio, GetRoom's ÷ ListRoomEvents', is the rate ratio of a machine this
// process had to itself.
func BenchmarkListRoomEventsVsGetRoomOverGRPC(b *testing.B) {
	_, rc := startDevB(b, func(c *configs.Config) { c.Log.Level = "error" })
	ctx := context.Background()
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c", AppCode: "bench", RoomId: "ev-0", UserId: "owner", Name: "n"}); err != nil {
		b.Fatal(err)
	}
	for k := range 999 {
		id, user := fmt.Sprint("c", k), fmt.Sprint("u", k%4)
		var err error
		if k/4%2 == 0 {
			_, err = rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: id, AppCode: "bench", RoomId: "ev-0", UserId: user})
		} else {
			_, err = rc.LeaveRoom(ctx, &v1.LeaveRoomRequest{CommandId: id, AppCode: "bench", RoomId: "ev-0", UserId: user})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	list := &v1.ListRoomEventsRequest{AppCode: "bench", RoomId: "ev-0", AfterRoomSeq: 900, Limit: 100}
	if r, err := rc.ListRoomEvents(ctx, list); err != nil || len(r.Events) != 100 {
		b.Fatalf("the read: %d events, %v", len(r.GetEvents()), err)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// rate runs n calls of call over 32 callers and answers calls/s and
	// the CPU per call in µs.
	rate := func(n int, call func() error) (float64, float64) {
		c0 := cpu()
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		start := time.Now()
		for range 32 {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := call(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return float64(n) / time.Since(start).Seconds(), float64((cpu() - c0).Microseconds()) / float64(n)
	}
	get := &v1.GetRoomRequest{AppCode: "bench", RoomId: "ev-0"}
	b.ResetTimer()
	g, gcpu := rate(b.N, func() error { _, err := rc.GetRoom(ctx, get); return err })
	l, lcpu := rate(b.N, func() error {
		r, err := rc.ListRoomEvents(ctx, list)
		if err == nil && len(r.Events) != 100 {
			err = fmt.Errorf("%d events", len(r.Events))
		}
		return err
	})
	b.ReportMetric(g, "getroom/s")
	b.ReportMetric(l, "events/s")
	b.ReportMetric(l/g, "ratio")
	b.ReportMetric(gcpu, "getroom-cpu-us")
	b.ReportMetric(lcpu, "events-cpu-us")
	b.ReportMetric(gcpu/lcpu, "cpu-ratio")
}
