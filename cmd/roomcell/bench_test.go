package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
)

// BenchmarkGRPCCommands measures commands/s end to end (gRPC client →
// interceptors → cluster → grain → memdb) for 1 room (every command
// serialised by one grain) and for 1000 rooms.
func BenchmarkGRPCCommands(b *testing.B) {
	for _, rooms := range []int{1, 1000} {
		b.Run(fmt.Sprintf("rooms=%d", rooms), func(b *testing.B) {
			_, rc := startDevB(b, func(c *configs.Config) { c.Log.Level = "error" })
			ctx := context.Background()
			for r := range rooms {
				if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c", AppCode: "bench", RoomId: fmt.Sprint("r", r), UserId: "owner", Name: "n"}); err != nil {
					b.Fatal(err)
				}
			}
			var workers, cmds, retried atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				// One user per worker alternating join and leave: rooms
				// keep a steady size, every command is logged with events.
				w := workers.Add(1)
				user := fmt.Sprint("u", w)
				for k := int64(0); pb.Next(); k++ {
					room := fmt.Sprint("r", (w+k/2)%int64(rooms))
					id := fmt.Sprint("c", cmds.Add(1))
					var err error
					// A saturated machine answers Unavailable (deadline
					// passed); a client retries with the same command_id,
					// which lands once. Any other error fails the run: a
					// leave of the room just joined must find the user.
					for try := 0; try == 0 || (status.Code(err) == codes.Unavailable && try <= 5); try++ {
						if try > 0 {
							retried.Add(1)
							time.Sleep(50 * time.Millisecond)
						}
						if k%2 == 0 {
							_, err = rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: id, AppCode: "bench", RoomId: room, UserId: user})
						} else {
							_, err = rc.LeaveRoom(ctx, &v1.LeaveRoomRequest{CommandId: id, AppCode: "bench", RoomId: room, UserId: user})
						}
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cmds/s")
			b.ReportMetric(float64(retried.Load()), "retries")
		})
	}
}
