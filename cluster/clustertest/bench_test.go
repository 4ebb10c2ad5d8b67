//go:build !race

package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// Commands/s through 1, 2 and 3 roomcell processes on this machine, the
// load spread over every node. All processes share the same CPUs (and
// MariaDB), so more nodes cannot add capacity here: the difference is the
// cost of forwarding (about 2/3 of commands cross a node with 3 nodes).
//
//	go test -run '^$' -bench MultiMemberCommands -benchtime 3000x ./cluster/clustertest/
func BenchmarkMultiMemberCommands(b *testing.B) {
	for _, nodes := range []int{1, 2, 3} {
		c := New(b, Options{Nodes: nodes, BinDir: binDir})
		rooms := RoomIDs(64)
		CreateRooms(b, c.Nodes, rooms, 8)
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			var seq atomic.Int64
			start := time.Now()
			b.SetParallelism(4) // 4 × GOMAXPROCS client goroutines
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					n := c.Nodes[int(i)%len(c.Nodes)]
					id := fmt.Sprintf("b%d-%d", nodes, i)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, err := n.Rooms(b).JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: id, AppCode: App,
						RoomId: rooms[rand.IntN(len(rooms))], UserId: "u-" + id})
					cancel()
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commands/s")
		})
		for _, n := range c.Nodes {
			n.Kill()
		}
	}
}

// One client, one command at a time: a room asked through the node that
// hosts it (local) against through another node (forwarded over the
// cluster remote), for a read (GetRoom, no store write) and a write
// (JoinRoom, one MariaDB transaction).
//
//	go test -run '^$' -bench MultiMemberForwarding -benchtime 2000x ./cluster/clustertest/
func BenchmarkMultiMemberForwarding(b *testing.B) {
	c := New(b, Options{Nodes: 2, BinDir: binDir})
	rooms := RoomIDs(40)
	CreateRooms(b, c.Nodes, rooms, 8)
	entry := c.Nodes[0]
	var local, remote []string
	for _, r := range rooms {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		w, err := entry.Admin(b).WhereIsRoom(ctx, &v1.WhereIsRoomRequest{AppCode: App, RoomId: r})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if w.GetOwnerAddress() == entry.ClusterAddr {
			local = append(local, r)
		} else {
			remote = append(remote, r)
		}
	}
	if len(local) == 0 || len(remote) == 0 {
		b.Fatalf("placement gave %d local and %d remote rooms", len(local), len(remote))
	}
	rooms2 := map[string][]string{"local": local, "forwarded": remote}
	for _, op := range []string{"read", "write"} {
		for _, where := range []string{"local", "forwarded"} {
			b.Run(op+"/"+where, func(b *testing.B) {
				rs := rooms2[where]
				for i := range b.N {
					r := rs[i%len(rs)]
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					var err error
					if op == "read" {
						_, err = entry.Rooms(b).GetRoom(ctx, &v1.GetRoomRequest{AppCode: App, RoomId: r})
					} else {
						id := fmt.Sprintf("f-%s-%d", where, i)
						_, err = entry.Rooms(b).JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: id, AppCode: App, RoomId: r, UserId: "u-" + id})
					}
					cancel()
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
