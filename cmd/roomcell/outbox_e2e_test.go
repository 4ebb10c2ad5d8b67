package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/tencentim"
	"github.com/hyapp/roomcell/persistence"
)

func fastRelay(c *configs.Config) {
	c.OutboxWorker.PollInterval = 100 * time.Millisecond
	c.OutboxWorker.PublishTimeout = 500 * time.Millisecond
	c.Room.PublishTimeout = 500 * time.Millisecond
	c.OutboxWorker.LeaseTTL = 2 * time.Second
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Seed 000's Done Definition, end to end: command committed → outbox
// persisted → sync Tencent IM publish fails → the gRPC command still
// succeeds → the row stays pending → the relay publishes the same event_id
// → the row is published → shutdown stops the relay before the store
// closes.
func TestSeedDoneDefinition(t *testing.T) { seedDoneDefinition(t) }

// TestRoomOutboxCompensationWhenSyncPublishFails is the test seed 000
// names ("已有测试 … 可以作为基础"): the same Done Definition run, under the
// seed's name.
func TestRoomOutboxCompensationWhenSyncPublishFails(t *testing.T) { seedDoneDefinition(t) }

func seedDoneDefinition(t *testing.T) {
	app, rc := startDev(t, fastRelay)
	ctx := ctxT(t)
	if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c1", AppCode: "lalu", RoomId: "r1", UserId: "owner", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	// The room's creation events first: while one of them is pending, the
	// join is (rightly) held back behind it and never tried on its own.
	waitUntil(t, 5*time.Second, "creation events published", func() bool {
		st, err := app.store.OutboxStats(ctx)
		return err == nil && st.Pending == 0
	})
	fake := app.fakeIM
	fake.FailFraction(1, 20004, tencentim.APISendGroupMsg) // IM down for group messages

	join, err := rc.JoinRoom(ctx, &v1.JoinRoomRequest{CommandId: "c2", AppCode: "lalu", RoomId: "r1", UserId: "bob"})
	if err != nil {
		t.Fatalf("command must succeed while IM fails: %v", err)
	}
	if join.Room.Seq != 2 || join.Room.MemberCount != 2 {
		t.Fatalf("room state not updated: %+v", join.Room)
	}
	id := join.EventIds[0]
	row, err := app.store.GetOutbox(ctx, id)
	if err != nil || row.Status != persistence.OutboxPending {
		t.Fatalf("row after failed sync publish: %+v %v", row, err)
	}
	// The relay keeps trying: retry_count grows, last_error is short.
	waitUntil(t, 20*time.Second, "relay retries the failing row", func() bool {
		r, _ := app.store.GetOutbox(ctx, id)
		return r.RetryCount >= 2 && r.LastError != "" && r.Status == persistence.OutboxPending
	})
	fake.ResetFaults()
	waitUntil(t, 20*time.Second, "relay publishes after IM is back", func() bool {
		r, _ := app.store.GetOutbox(ctx, id)
		return r.Status == persistence.OutboxPublished && r.LastError == ""
	})
	if fake.EventIDCounts()[id] < 1 {
		t.Fatalf("fake IM never received %s", id)
	}
	app.Shutdown()
	relayAt, storeAt := slices.Index(app.stopped, "worker room_outbox"), slices.Index(app.stopped, "store")
	grpcAt := slices.Index(app.stopped, "grpc")
	if relayAt < 0 || storeAt < 0 || !(relayAt < grpcAt && grpcAt < storeAt) {
		t.Fatalf("shutdown order %v: want the relay stopped before gRPC, gRPC before the store", app.stopped)
	}
}

// The fault run: for a while the fake IM fails half the calls
// and holds a quarter past the publish timeout while commands run. Every
// command must succeed, and every event must reach IM once the faults stop.
func TestFaultsNeverFailCommandsAndEveryEventArrives(t *testing.T) {
	faultFor := 10 * time.Second
	if !testing.Short() {
		faultFor = 30 * time.Second
	}
	app, rc := startDev(t, func(c *configs.Config) {
		fastRelay(c)
		c.OutboxWorker.PollInterval = 250 * time.Millisecond
	})
	ctx := context.Background()
	const rooms = 20
	for r := range rooms {
		if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c", AppCode: "f", RoomId: fmt.Sprint("r", r), UserId: "owner", Name: "n"}); err != nil {
			t.Fatal(err)
		}
	}
	fake := app.fakeIM
	fake.FailFraction(0.5, 20004)
	fake.DelayFraction(0.25, 700*time.Millisecond) // past the 500ms publish timeout

	var ok, failed atomic.Int64
	var ids sync.Map
	stop := time.Now().Add(faultFor)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprint("u", w)
			for k := 0; time.Now().Before(stop); k++ {
				room := fmt.Sprint("r", (w+k/2)%rooms)
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				var reply *v1.CommandReply
				var err error
				if k%2 == 0 {
					reply, err = rc.JoinRoom(cctx, &v1.JoinRoomRequest{CommandId: fmt.Sprint(w, "-", k), AppCode: "f", RoomId: room, UserId: user})
				} else {
					reply, err = rc.LeaveRoom(cctx, &v1.LeaveRoomRequest{CommandId: fmt.Sprint(w, "-", k), AppCode: "f", RoomId: room, UserId: user})
				}
				cancel()
				if err != nil {
					failed.Add(1)
					t.Errorf("command failed under IM faults: %v", err)
					return
				}
				ok.Add(1)
				for _, id := range reply.EventIds {
					ids.Store(id, true)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	fake.ResetFaults()
	var want []string
	ids.Range(func(k, _ any) bool { want = append(want, k.(string)); return true })
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := app.store.OutboxStats(ctx)
		if err == nil && st.Pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			rows, _ := app.store.ListOutbox(ctx, persistence.OutboxFilter{Status: persistence.OutboxPending, Limit: 5})
			for _, r := range rows {
				t.Logf("still pending: %s %s retry_count=%d lease=%s until %d last_error=%q", r.Envelope.EventID, r.Envelope.EventType, r.RetryCount, r.LockedBy, r.LockUntilMs, r.LastError)
			}
			t.Fatalf("%d events still pending 60s after the faults stopped", st.Pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	counts := fake.EventIDCounts()
	dups := 0
	for _, id := range want {
		if counts[id] == 0 {
			t.Fatalf("event %s never reached IM", id)
		}
		dups += counts[id] - 1
	}
	t.Logf("fault run %s: %d commands ok, %d failed, %d events, %d duplicate deliveries by event_id (%.2f%%), %d swallowed by the fake's dedupe window",
		faultFor, ok.Load(), failed.Load(), len(want), dups, 100*float64(dups)/float64(len(want)), fake.Duplicates())
	if failed.Load() != 0 || ok.Load() == 0 {
		t.Fatalf("%d commands failed", failed.Load())
	}
}

// Seed 000's start order (App Lifecycle: presence stale worker → outbox
// worker → grpcServer.Serve), with seed 003's notice workers after the
// relay and readiness last: no command is accepted before its
// compensation path runs. The shutdown runs the same workers in reverse.
func TestStartOrderFollowsSeed(t *testing.T) {
	app, _ := startDev(t, withNotices)
	want := []string{"worker presence_stale", "worker room_outbox", "worker notice", "worker retention_purge", "worker gift_reconciler", "grpc", "ready"}
	if !slices.Equal(app.started, want) {
		t.Fatalf("start order %v, want %v", app.started, want)
	}
	app.Shutdown()
	var workers []string
	for _, s := range app.stopped {
		if strings.HasPrefix(s, "worker ") && s != "worker workers" && s != "worker supervisor-log" {
			workers = append(workers, s)
		}
	}
	if back := []string{"worker gift_reconciler", "worker retention_purge", "worker notice", "worker room_outbox", "worker presence_stale"}; !slices.Equal(workers, back) {
		t.Fatalf("workers stopped in order %v, want %v (the reverse of the start)", workers, back)
	}
}
