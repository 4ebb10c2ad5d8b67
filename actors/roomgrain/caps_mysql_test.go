package roomgrain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	driverMySQL "github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/persistence"
	"github.com/hyapp/roomcell/persistence/mysql"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
	"github.com/hyapp/roomcell/room"
)

// Bans and chat mutes to their caps on MariaDB, with a small
// max_allowed_packet (256 KiB, a private mariadbd: the room's state at
// the ban cap is bigger, so its snapshot cannot be written) and at the
// server's default. Every append is stored whatever the snapshots do
// (the log's head is the last acknowledged seq, contiguous); past a cap
// the refusal is its code; the owner's unban, close and reopen work at
// the caps; once bans and mutes end, their places are free again; a new
// activation has the room as it was.
func TestBansAndMutesToTheirCapsOnMariaDB(t *testing.T) {
	for _, tc := range []struct {
		name   string
		packet int // 0: the server's own
	}{{"max_allowed_packet=256KiB", 256 << 10}, {"max_allowed_packet=default", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := mysqltest.DSN()
			if tc.packet > 0 {
				dsn = mysqltest.StartServer(t).DSN
				setMaxAllowedPacket(t, dsn, tc.packet)
			}
			capsOnMariaDB(t, dsn, tc.packet > 0)
		})
	}
}

func setMaxAllowedPacket(t *testing.T, dsn string, n int) {
	t.Helper()
	dc, err := driverMySQL.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := driverMySQL.NewConnector(dc)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, fmt.Sprintf("SET GLOBAL max_allowed_packet = %d", n)); err != nil {
		t.Fatal(err)
	}
}

func capsOnMariaDB(t *testing.T, dsn string, smallPacket bool) {
	store, sys, quiet := mysqlRooms(t, dsn)
	metrics, err := NewPublishMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	d := Deps{Store: store, Publisher: newIMRecorder(0), Gifts: FreeGifts(1), Config: configs.Default().Room, Logger: quiet,
		Clock: func() time.Time { return time.UnixMilli(now.Load()) }, PublishMetrics: metrics}
	d.setDefaults()
	withGate(&d)
	activate := func() *actor.PID {
		dd := d
		pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &grain{deps: &dd} }))
		sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: "app/caps", Kind: Kind}})
		return pid
	}
	pid := activate()
	var head int64 // the last acknowledged seq
	n := 0
	do := func(m proto.Message) (*v1.CommandReply, error) {
		t.Helper()
		n++
		// Every request carries the room and a fresh command_id.
		r := m.ProtoReflect()
		fields := r.Descriptor().Fields()
		r.Set(fields.ByName("app_code"), protoreflect.ValueOfString("app"))
		r.Set(fields.ByName("room_id"), protoreflect.ValueOfString("caps"))
		if f := fields.ByName("command_id"); f != nil {
			r.Set(f, protoreflect.ValueOfString(fmt.Sprintf("cmd-%d", n)))
		}
		res, err := sys.Root.RequestFuture(pid, wrap(m), 30*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		reply, err := replyOf(res)
		if _, read := m.(*v1.GetRoomRequest); err == nil && !read && reply.RoomSeq > 0 {
			if reply.RoomSeq != head+1 {
				t.Fatalf("command %d stored at seq %d after %d", n, reply.RoomSeq, head)
			}
			head = reply.RoomSeq
		}
		return reply, err
	}
	must := func(m proto.Message) *v1.CommandReply {
		t.Helper()
		r, err := do(m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		return r
	}
	refused := func(m proto.Message, code errclass.Code) {
		t.Helper()
		if _, err := do(m); errclass.CodeOf(err) != code {
			t.Fatalf("%T: %v, want %s", m, err, code)
		}
	}

	start := time.Now()
	must(&v1.CreateRoomRequest{UserId: "owner", Name: "caps"})
	const batch = room.MaxBanTargets
	for i := 0; i < room.MaxBans; i += batch {
		ids := make([]string, batch)
		for j := range ids {
			ids[j] = fmt.Sprintf("banned-user-%05d", i+j)
		}
		must(&v1.BanUserRequest{UserId: "owner", TargetUserIds: ids, BanSeconds: 60, Reason: "spam wave"})
	}
	refused(&v1.BanUserRequest{UserId: "owner", TargetUserId: "one-more", BanSeconds: 60}, errclass.CodeTooManyBans)
	// At the cap: the owner lifts one, and the place is there again.
	must(&v1.UnbanUserRequest{UserId: "owner", TargetUserId: "banned-user-00007"})
	must(&v1.BanUserRequest{UserId: "owner", TargetUserId: "one-more", BanSeconds: 60})
	refused(&v1.BanUserRequest{UserId: "owner", TargetUserId: "two-more", BanSeconds: 60}, errclass.CodeTooManyBans)
	banCap := head

	for i := range room.MaxMutes {
		u := fmt.Sprintf("muted-user-%04d", i)
		must(&v1.JoinRoomRequest{UserId: u})
		must(&v1.MuteMemberRequest{UserId: "owner", TargetUserId: u, MuteSeconds: 60})
	}
	must(&v1.JoinRoomRequest{UserId: "extra"})
	refused(&v1.MuteMemberRequest{UserId: "owner", TargetUserId: "extra", MuteSeconds: 60}, errclass.CodeTooManyMutes)
	// Close and reopen at both caps.
	must(&v1.CloseRoomRequest{UserId: "owner"})
	must(&v1.ReopenRoomRequest{UserId: "owner"})
	t.Logf("%d commands to the caps in %v", head, time.Since(start).Round(time.Millisecond))

	// Once they end, bans and mutes free their places; an ended mute can
	// be cleared.
	now.Add(61_000)
	if r := must(&v1.UnmuteMemberRequest{UserId: "owner", TargetUserId: "muted-user-0001"}); len(r.EventIds) != 1 {
		t.Fatalf("unmuting an ended mute: %d events, want its clearing", len(r.EventIds))
	}
	must(&v1.BanUserRequest{UserId: "owner", TargetUserId: "late", BanSeconds: 60})
	must(&v1.JoinRoomRequest{UserId: "extra"})
	must(&v1.MuteMemberRequest{UserId: "owner", TargetUserId: "extra", MuteSeconds: 60})

	// No append wedged: the log is every acknowledged seq, once.
	recs, err := store.LoadCommands(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "caps"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(recs)) != head || recs[len(recs)-1].Seq != head {
		t.Fatalf("log of %d records ending at %d, %d acknowledged", len(recs), recs[len(recs)-1].Seq, head)
	}
	// The snapshots: refused by the small packet (counted, nothing
	// failed with them), written at the default.
	waitFor(t, func() bool {
		return testutil.ToFloat64(metrics.Snapshots.Failed.WithLabelValues("store"))+float64(snapshotSeq(t, store)) > 0
	})
	failed := testutil.ToFloat64(metrics.Snapshots.Failed.WithLabelValues("store"))
	snap, err := store.LoadSnapshot(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "caps"})
	t.Logf("head %d (ban cap reached at %d), snapshot at seq %d of %d bytes (%v), %v snapshots refused by the store",
		head, banCap, snap.Seq, len(snap.State), err, failed)
	if smallPacket {
		if failed == 0 || snap.Seq >= banCap {
			t.Fatalf("a snapshot at the ban cap passed a 256 KiB packet: snapshot seq %d, %v refused", snap.Seq, failed)
		}
	} else {
		if err != nil || snap.Seq < head-int64(d.Config.SnapshotEvery) || failed != 0 {
			t.Fatalf("snapshot at seq %d (%v) of head %d, %v refused", snap.Seq, err, head, failed)
		}
		if len(snap.State) > 4<<20 {
			t.Fatalf("snapshot at both caps is %d bytes, over 4 MiB", len(snap.State))
		}
	}
	// A new activation (from the snapshot, or the whole log) is the room.
	sys.Root.Stop(pid)
	pid = activate()
	after := must(&v1.GetRoomRequest{})
	if after.RoomSeq != head {
		t.Fatalf("new activation at seq %d, head %d", after.RoomSeq, head)
	}
	must(&v1.BanUserRequest{UserId: "owner", TargetUserId: "after-restart", BanSeconds: 60})
}

// mysqlRooms opens a store on a new database of the server at dsn, and an
// actor system for the rooms over it; both close with the test.
func mysqlRooms(t *testing.T, dsn string) (*mysql.Store, *actor.ActorSystem, *slog.Logger) {
	t.Helper()
	cfg, _ := mysqltest.NewDatabaseOn(t, dsn)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := mysql.Open(context.Background(), cfg, mysql.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	return store, sys, quiet
}

func snapshotSeq(t *testing.T, store persistence.RoomStore) int64 {
	snap, err := store.LoadSnapshot(context.Background(), persistence.RoomKey{AppCode: "app", RoomID: "caps"})
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		t.Fatal(err)
	}
	return snap.Seq
}
