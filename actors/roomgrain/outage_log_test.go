package roomgrain

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/internal/logthrottle"
)

// With the store down, every command fails; through the process's
// throttled logger that is a line per message per interval, not a line
// (or two) per failed command across all rooms.
func TestStoreOutageLogsOncePerIntervalAcrossRooms(t *testing.T) {
	f := newFixture(t)
	flaky := &flakyStore{Store: f.store}
	f.deps.Store = flaky
	buf := &syncBuffer{}
	f.deps.Logger = slog.New(logthrottle.New(slog.NewJSONHandler(buf, nil), time.Hour))
	const rooms, each = 10, 50
	pids := make([]*actor.PID, rooms)
	for r := range rooms {
		pids[r] = f.activate(fmt.Sprint("app/r", r))
		f.mustDo(pids[r], inRoom(rcCreate(fmt.Sprint("c", r), "owner"), r))
	}
	flaky.down.Store(true)
	failed := 0
	for i := range each {
		for r := range rooms {
			if _, err := f.do(pids[r], inRoom(rcJoin(fmt.Sprintf("j%d-%d", r, i), fmt.Sprint("u", i)), r)); !errors.Is(err, errclass.Unavailable) {
				t.Fatalf("store down: %v, want ErrUnavailable", err)
			}
			failed++
		}
	}
	lines := buf.Lines()
	// One "room append failed" (the first failure), then every later
	// command fails its reload: one "room load failed".
	if len(lines) == 0 || len(lines) > 2 || lines[0]["msg"] != "room append failed" || lines[0]["room_id"] == nil {
		t.Fatalf("%d log lines for %d failed commands, want at most 2, the first naming its room: %v", len(lines), failed, lines)
	}
}

// inRoom moves a fixture command (built for r1) to room r<n>.
func inRoom(rc *v1.RoomCommand, n int) *v1.RoomCommand {
	id := fmt.Sprint("r", n)
	switch c := rc.GetCommand().(type) {
	case *v1.RoomCommand_CreateRoom:
		c.CreateRoom.RoomId = id
	case *v1.RoomCommand_JoinRoom:
		c.JoinRoom.RoomId = id
	}
	return rc
}
