package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/configs"
	"github.com/hyapp/roomcell/delivery/tencentim"
)

// An IM outage under steady traffic: every command's event fails its
// publish (sync path and relay), yet the node's log at the default level
// grows by a constant number of lines per interval, not by the command
// rate. Shortened from 30 s to 5 s; the rate is what this 2-core machine
// reaches (logged), and the bound does not depend on it.
func TestIMOutageLogLinesDoNotFollowTheCommandRate(t *testing.T) {
	app, logs, rc := startLogged(t, func(c *configs.Config) { c.OutboxWorker.PollInterval = 200 * time.Millisecond })
	const rooms = 20
	for r := range rooms {
		id := fmt.Sprint("out-", r)
		if _, err := rc.CreateRoom(ctxT(t), &v1.CreateRoomRequest{CommandId: "c-" + id, AppCode: "app", RoomId: id, UserId: "owner", Name: id}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	app.fakeIM.FailFraction(1, 20004, tencentim.APISendGroupMsg)
	linesBefore := strings.Count(logs.String(), "\n")

	const outage = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), outage)
	defer cancel()
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				user := fmt.Sprintf("u%d-%d", w, i)
				cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := rc.JoinRoom(cctx, &v1.JoinRoomRequest{CommandId: "j-" + user, AppCode: "app", RoomId: fmt.Sprint("out-", i%rooms), UserId: user})
				ccancel()
				if err == nil {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	all := logs.String()
	lines := strings.Count(all, "\n") - linesBefore
	// The outage did fail the publishes, and said so (with a count later).
	if !strings.Contains(all, "20004") {
		t.Fatalf("no IM failure logged during the outage:\n%s", all)
	}
	rate := float64(done.Load()) / outage.Seconds()
	t.Logf("IM outage %s: %d commands (%.0f/s), %d log lines (%.1f/s)", outage, done.Load(), rate, lines, float64(lines)/outage.Seconds())
	if rate < 50 {
		t.Fatalf("only %.0f commands/s reached: too few to show anything", rate)
	}
	// The outage's distinct lines (sync publish failed, relay publish
	// failed, IM send failed, ...) once each per 10 s interval, plus the
	// supervisor and cluster lines a busy node may write: a constant.
	if lines > 40 {
		t.Fatalf("%d log lines in %s of outage at %.0f commands/s: grows with traffic\n%s", lines, outage, rate, all[max(0, len(all)-4000):])
	}
}
