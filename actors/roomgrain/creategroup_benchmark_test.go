package roomgrain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/cluster"
	grainkind "github.com/hyapp/roomcell/cluster/kind"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery"
	"github.com/hyapp/roomcell/delivery/imfake"
	"github.com/hyapp/roomcell/delivery/roomim"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/memdb"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// afterReply is the room publisher without CreateRoom's group step: the
// inline create is refused at once, so RoomCreated goes with the rest to
// the room's publisher, which creates the group after the reply (what
// roomcell did before the group moved onto CreateRoom's path).
type afterReply struct{ *roomim.Publisher }

func (p afterReply) PublishRoomEvent(ctx context.Context, env persistence.Envelope) error {
	if env.EventType == room.TypeRoomCreated {
		return errors.New("group step skipped")
	}
	return p.Publisher.PublishRoomEvent(ctx, env)
}

// BenchmarkCreateRoomGroup measures CreateRoom's latency (one caller,
// each op a new room) through cluster.Request on a one-member cluster,
// with the real Tencent IM client and a fake IM over loopback HTTP: with
// the group created on the command's path (on-path: create_group before
// the reply, after an account_import when the owner is new) and after
// the reply (after-reply). The client's per-API quota is lifted (Tencent
// allows 200 create_group calls/s, which the client keeps by waiting: one
// caller back to back would measure the quota, not the path). It reports the p50 and p99
// in µs; the figure is on-path ÷ after-reply p50, per store and
// owner (new: a first room of its owner; known: the owner already
// imported). store=mariadb needs the shared MariaDB.
func BenchmarkCreateRoomGroup(b *testing.B) {
	stores := map[string]func(b *testing.B) Store{
		"memdb": func(*testing.B) Store { return memdb.New() },
		"mariadb": func(b *testing.B) Store {
			cfg, _ := mysqltest.NewDatabase(b)
			s, err := mysql.Open(context.Background(), cfg, mysql.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
	}
	for _, st := range []string{"memdb", "mariadb"} {
		for _, owner := range []string{"new", "known"} {
			for _, mode := range []string{"on-path", "after-reply"} {
				b.Run(fmt.Sprintf("store=%s/owner=%s/group=%s", st, owner, mode), func(b *testing.B) {
					benchCreate(b, stores[st](b), owner == "new", mode == "after-reply")
				})
			}
		}
	}
}

func benchCreate(b *testing.B, store Store, newOwner, after bool) {
	quiet := slog.New(slog.DiscardHandler)
	fake, err := imfake.Start("127.0.0.1:0", imfake.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	imCfg := fake.ClientConfig()
	imCfg.RatePerSecond = 1_000_000
	client, err := tencentim.New(imCfg, tencentim.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	im := roomim.New(client, roomim.WithLogger(quiet))
	defer im.Close()
	var pub delivery.Publisher = im
	if after {
		pub = afterReply{im}
	}
	cfg := configs.Default()
	cfg.Cluster.Port = 0
	deps := Deps{Store: store, Publisher: pub, Gifts: fixedHeat(1), Config: cfg.Room}
	m, err := cluster.Start(cluster.Options{Config: cfg.Cluster, Kinds: []*pcluster.Kind{grainkind.New(Kind, GrainProps(deps))}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Stop(false)
	c := &Client{Cluster: m.Cluster, AttemptTimeout: 5 * time.Second}
	ctx := context.Background()
	if err := client.EnsureAccount(ctx, "owner"); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	ready := 0
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("%d-%d", b.N, i)
		owner := "owner"
		if newOwner {
			owner = "owner-" + id
		}
		start := time.Now()
		reply, err := c.Execute(ctx, &v1.RoomCommand{Command: &v1.RoomCommand_CreateRoom{CreateRoom: &v1.CreateRoomRequest{
			CommandId: "create", AppCode: "bench", RoomId: "r" + id, UserId: owner, Name: "n"}}})
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if reply.ImGroupReady {
			ready++
		}
	}
	b.StopTimer()
	if !after && ready != b.N {
		b.Fatalf("%d of %d creates had their group ready", ready, b.N)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
