package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hyapp/roomcell/actors/supervise"
	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// A background worker that panics on every round is a metric and a log
// line, not an unready node: /readyz stays up, commands keep working and
// the restart metric counts every restart.
func TestPanickingWorkerLeavesTheNodeReady(t *testing.T) {
	app, rc := startDev(t, nil)
	rounds := make(chan struct{}, 100)
	if _, err := supervise.StartPoller(app.workerSup, supervise.PollerSpec[struct{}]{Name: "panicker", New: func() supervise.Round[struct{}] {
		return func(context.Context) (time.Duration, struct{}) {
			select {
			case rounds <- struct{}{}:
			default:
			}
			panic("a row every relay claims")
		}
	}}); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) { return opsGet(t, app, path) }
	restarts := regexp.MustCompile(`roomcell_worker_restarts_total\{worker="panicker"\} (\d+)`)
	ctx := ctxT(t)
	sawDown := false
	for i := 0; ; i++ {
		if code, body := get("/readyz"); code != 200 {
			t.Fatalf("/readyz %d %q while a worker restarts", code, body)
		}
		_, metrics := get("/metrics")
		if regexp.MustCompile(`roomcell_workers_down 1`).MatchString(metrics) {
			sawDown = true
		}
		n := 0
		if m := restarts.FindStringSubmatch(metrics); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		// Commands work between the panics.
		room := fmt.Sprint("ready-", i)
		if _, err := rc.CreateRoom(ctx, &v1.CreateRoomRequest{CommandId: "c-" + room, AppCode: "app", RoomId: room, UserId: "u1", Name: room}); err != nil {
			t.Fatalf("CreateRoom while a worker restarts: %v", err)
		}
		if n >= 3 && sawDown {
			if app.workerHealth.Restarts("panicker") < n {
				t.Fatalf("health counts %d restarts, metric %d", app.workerHealth.Restarts("panicker"), n)
			}
			return
		}
		if i > 200 {
			t.Fatalf("after %d checks: %d restarts counted, workers_down seen %v; want 3 restarts and the gauge", i, n, sawDown)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// opsGet reads path from the app's ops HTTP listener.
func opsGet(t *testing.T, app *App, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + app.HTTPAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
