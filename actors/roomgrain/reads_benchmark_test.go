package roomgrain

import (
	"context"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/persistence/memdb"
)

// BenchmarkClientGetRoom is GetRoom through the room client from 16
// callers at once into one room of this node: the direct request to a
// local grain (localcall.go) and the kept first-page answer (reads.go),
// without gRPC. docs/benchmarks.md has the figures.
//
//	go test ./actors/roomgrain -run '^$' -bench ClientGetRoom -benchtime 100000x -cpu 1
func BenchmarkClientGetRoom(b *testing.B) {
	c := benchNode(b, Deps{Store: memdb.New(), Gifts: fixedHeat(1)}, 3*time.Second)
	ctx := context.Background()
	if _, err := c.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
		CommandId: "create", AppCode: "bench", RoomId: "r0", UserId: "owner", Name: "n"}}}); err != nil {
		b.Fatal(err)
	}
	get := &v1.RoomCommand{Command: &v1.RoomCommand_GetRoom{GetRoom: &v1.GetRoomRequest{AppCode: "bench", RoomId: "r0"}}}
	b.ReportAllocs()
	b.ResetTimer()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for pb.Next() {
			if _, err := c.Execute(ctx, get); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
