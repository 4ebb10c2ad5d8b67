package roomgrain

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	grainkind "github.com/hyapp/roomcell/cluster/kind"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// BenchmarkGrainCommand measures persisted room commands per second
// through cluster.Request on a one-member cluster with the memdb store:
// the grain's own cost (dedupe, decide, append, reply) plus the cluster's
// local request path.
func BenchmarkGrainCommand(b *testing.B) {
	for _, rooms := range []int{1, 100} {
		b.Run(fmt.Sprintf("rooms=%d", rooms), func(b *testing.B) {
			c := benchNode(b, Deps{Store: memdb.New(), Gifts: fixedHeat(1)}, 5*time.Second)
			ctx := context.Background()
			for r := range rooms {
				if _, err := c.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
					CommandId: "create", AppCode: "bench", RoomId: fmt.Sprint("r", r), UserId: "owner", Name: "n"}}}); err != nil {
					b.Fatal(err)
				}
			}
			var workers, cmds atomic.Int64
			b.ResetTimer()
			start := time.Now()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				// Each worker is one user alternating join and leave, so
				// rooms keep a steady size and every command is logged
				// with events.
				w := workers.Add(1)
				user := fmt.Sprint("u", w)
				for k := int64(0); pb.Next(); k++ {
					room := fmt.Sprint("r", (w+k/2)%int64(rooms))
					id := fmt.Sprint("c", cmds.Add(1))
					var rc *v1.RoomCommand
					if k%2 == 0 {
						rc = &v1.RoomCommand{Command: &v1.RoomCommand_JoinRoom{JoinRoom: &v1.JoinRoomRequest{CommandId: id, AppCode: "bench", RoomId: room, UserId: user}}}
					} else {
						rc = &v1.RoomCommand{Command: &v1.RoomCommand_LeaveRoom{LeaveRoom: &v1.LeaveRoomRequest{CommandId: id, AppCode: "bench", RoomId: room, UserId: user}}}
					}
					if _, err := c.Execute(ctx, rc); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cmds/s")
		})
	}
}

// benchNode starts a one-member cluster of room grains on deps (the
// default config on any port; deps.Config is the default room config),
// stopped when the benchmark ends, and returns a client of it whose
// attempts time out after attempt.
func benchNode(b *testing.B, deps Deps, attempt time.Duration) *Client {
	b.Helper()
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	deps.Config = cfg.Room
	m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(Kind, GrainProps(deps))}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Stop(false) })
	return &Client{Cluster: m.Cluster, AttemptTimeout: attempt}
}
