package main

import (
	"encoding/json"
	"testing"

	roomcellv1 "github.com/hyapp/roomcell/grpcapi/roomcellv1"
)

func TestBenchDrivesJoinLeavePairsAndReports(t *testing.T) {
	addr, b := startRoomTestServer(t)
	code, out, errOut := runCtl(t, addr, "--json", "bench", "--rooms", "3", "--concurrency", "2", "--duration", "2s", "--commands", "40")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json output %q: %v", out, err)
	}
	if r.Commands < 40 || r.Errors != 0 || r.Rooms != 3 || r.PerSecond <= 0 || r.P50Ms <= 0 {
		t.Fatalf("result %+v", r)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var creates, joins, leaves int
	for _, c := range b.got {
		switch c.Command.(type) {
		case *roomcellv1.RoomCommand_CreateRoom:
			creates++
		case *roomcellv1.RoomCommand_JoinRoom:
			joins++
		case *roomcellv1.RoomCommand_LeaveRoom:
			leaves++
		}
	}
	if creates != 3 || joins == 0 || leaves == 0 || joins-leaves > 2 || int64(joins+leaves) != r.Commands {
		t.Fatalf("server saw %d creates, %d joins, %d leaves for %d commands", creates, joins, leaves, r.Commands)
	}
}

func TestBenchRejectsNonPositiveFlags(t *testing.T) {
	addr, _ := startRoomTestServer(t)
	if code, _, errOut := runCtl(t, addr, "bench", "--rooms", "0"); code != 1 || errOut == "" {
		t.Fatalf("--rooms 0: exit %d %q", code, errOut)
	}
}
