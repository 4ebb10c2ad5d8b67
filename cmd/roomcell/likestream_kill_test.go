package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/grpcapi"
	"github.com/hyapp/roomcell/persistence/mysql/mysqltest"
)

// A like acknowledged on a LikeStream is counted exactly once across a
// SIGKILL: members like a room on MariaDB over their streams (each at
// most grpcapi.LikeStreamInFlight likes without an ack), the process is
// killed with likes in flight, and after its restart each member opens a
// new stream and sends again every like it has no ack for, under the
// same command_ids, until each is acknowledged. The room's total is then
// the likes sent: none acknowledged before the kill is lost, none sent
// twice is counted twice. Before the kill the members' streams are also
// dropped now and then by the clients themselves, their likes in flight
// sent again on a new stream: the room answers duplicate for those it
// counted already.
func TestLikeStreamExactAcrossKill9(t *testing.T) {
	bin, err := buildServer()
	if err != nil {
		t.Fatal(err)
	}
	mcfg, database := mysqltest.NewDatabase(t)
	config := writeMySQLNodeConfig(t, "likekill", mcfg.DSN, database, `room: {snapshot_every: 10, like_window: "200ms"}
`)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	first := startChild(t, bin, config, grpcAddr, httpAddr)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := v1.NewRoomServiceClient(conn)
	ctx := context.Background()
	const app, roomID, members, perCall = "likekill", "r", 12, int64(3)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "create", AppCode: app, RoomId: roomID, UserId: "owner", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	for m := range members {
		if _, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: fmt.Sprint("j", m), AppCode: app, RoomId: roomID, UserId: fmt.Sprint("u", m)}); err != nil {
			t.Fatal(err)
		}
	}
	plan := likersPlan{AppCode: app, RoomID: roomID, PerCall: perCall, Timeout: 10 * time.Second}
	var counted, sent atomic.Int64
	var sending atomic.Bool
	sending.Store(true)
	var errMu sync.Mutex
	var errs []string
	fail := func(format string, args ...any) {
		errMu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		errMu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var dupMu sync.Mutex
	duplicates := 0
	for m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := newStreamLiker(rc, plan, fmt.Sprint("u", m), &counted, fail)
			defer l.close()
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					l.drain()
					dupMu.Lock()
					duplicates += l.duplicates
					dupMu.Unlock()
					return
				case a := <-l.acks:
					l.answered(a)
					continue
				case <-tick.C:
				}
				l.resendLate()
				if sending.Load() && len(l.pending) < grpcapi.LikeStreamInFlight {
					sent.Add(1)
					l.like(fmt.Sprintf("k-%d-%d", m, n))
				}
				// Now and then a member's connection drops with likes in
				// flight (its stream cancelled): it opens another and sends
				// them again, and those the room already counted are
				// answered duplicate.
				if sending.Load() && n%60 == 59 && l.stream != nil {
					l.close()
				}
			}
		}()
	}
	// Kill under load: after a second, and once 300 likes were
	// acknowledged (a busy machine needs longer for that).
	time.Sleep(time.Second)
	for deadline := time.Now().Add(30 * time.Second); counted.Load() < 300*perCall && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	sending.Store(false)
	ackedAtKill, sentAtKill := counted.Load()/perCall, sent.Load()
	t.Logf("killed with SIGKILL after %d likes acknowledged, %d sent", ackedAtKill, sentAtKill)
	if ackedAtKill < 100 {
		t.Fatalf("only %d likes acknowledged before the kill; the test needs load", ackedAtKill)
	}
	if sentAtKill == ackedAtKill {
		t.Fatal("no like was in flight at the kill: nothing was tried")
	}

	startChild(t, bin, config, grpcAddr, httpAddr)
	close(stop) // each member sends again what it has no ack for, until acknowledged
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the members' likes were not all acknowledged after the restart")
	}
	errMu.Lock()
	for _, e := range errs {
		t.Error(e)
	}
	errMu.Unlock()
	got, err := rc.GetRoom(ctx, &v1.GetRoomRequest{AppCode: app, RoomId: roomID})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the restart: %d likes sent, %d acknowledged (%d of them duplicates: counted before, their acks lost with their stream), room total %d",
		sent.Load(), counted.Load()/perCall, duplicates, got.Room.Likes)
	if want := sent.Load() * perCall; got.Room.Likes != want || counted.Load() != want {
		t.Fatalf("room's likes %d, acknowledged %d, sent %d", got.Room.Likes, counted.Load(), want)
	}
	if duplicates == 0 {
		t.Fatal("no like sent again was found counted already: the resends tried nothing")
	}
}
