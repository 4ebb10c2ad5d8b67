package main

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	roomcellv1 "github.com/hyapp/roomcell/api/roomcellv1"
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
	if code, _, errOut := runCtl(t, addr, "bench", "--rooms", "0"); code != 2 || errOut == "" {
		t.Fatalf("--rooms 0: exit %d %q", code, errOut)
	}
}

// bigroom fills every room to --members first (one fill user per room and
// slot), then sends only joins, each of a user never seen before; hotroom
// sends everything to one room.
func TestBenchBigRoomAndHotRoomModes(t *testing.T) {
	addr, b := startRoomTestServer(t)
	code, out, errOut := runCtl(t, addr, "--json", "bench", "--mode", "bigroom", "--members", "5", "--rooms", "2",
		"--concurrency", "3", "--duration", "2s", "--commands", "30")
	if code != 0 {
		t.Fatalf("bigroom exit %d: %s", code, errOut)
	}
	var r benchResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Mode != "bigroom" || r.Members != 5 || r.Errors != 0 || r.Commands < 30 {
		t.Fatalf("bigroom result %+v", r)
	}
	b.mu.Lock()
	fills, joins := map[string]map[string]bool{}, map[string]int{}
	var leaves int
	for _, c := range b.got {
		switch x := c.Command.(type) {
		case *roomcellv1.RoomCommand_JoinRoom:
			j := x.JoinRoom
			if strings.HasPrefix(j.UserId, "bench-fill-") {
				if fills[j.RoomId] == nil {
					fills[j.RoomId] = map[string]bool{}
				}
				fills[j.RoomId][j.UserId] = true
				continue
			}
			joins[j.UserId]++
		case *roomcellv1.RoomCommand_LeaveRoom:
			leaves++
		}
	}
	b.got = nil
	b.mu.Unlock()
	if len(fills) != 2 || len(fills["bench-0"]) != 5 || len(fills["bench-1"]) != 5 {
		t.Fatalf("fill joins per room: %v, want 5 distinct users in each of 2 rooms", fills)
	}
	if leaves != 0 || int64(len(joins)) != r.Commands {
		t.Fatalf("bigroom: %d leaves, %d distinct joining users for %d commands", leaves, len(joins), r.Commands)
	}
	for u, n := range joins {
		if n != 1 {
			t.Fatalf("user %s joined %d times, want a new user per command", u, n)
		}
	}

	code, out, errOut = runCtl(t, addr, "--json", "bench", "--mode", "hotroom", "--rooms", "7", "--concurrency", "4",
		"--duration", "2s", "--commands", "40")
	if code != 0 {
		t.Fatalf("hotroom exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Rooms != 1 || r.Errors != 0 {
		t.Fatalf("hotroom result %+v %v", r, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	rooms := map[string]bool{}
	for _, c := range b.got {
		if j, ok := c.Command.(*roomcellv1.RoomCommand_JoinRoom); ok {
			rooms[j.JoinRoom.RoomId] = true
		}
	}
	if len(rooms) != 1 {
		t.Fatalf("hotroom joined rooms %v, want one", rooms)
	}
	if code, _, errOut := runCtl(t, addr, "bench", "--mode", "nope"); code != 2 || !strings.Contains(errOut, "--mode") {
		t.Fatalf("unknown mode: exit %d %q", code, errOut)
	}
}

// Rooms are created concurrently before the run, and a create answered
// Unavailable is sent again with the same command_id instead of ending the
// bench.
func TestBenchCreatesRoomsRetryingUnavailable(t *testing.T) {
	addr, b := startRoomTestServer(t)
	b.flakyCreates = true
	code, _, errOut := runCtl(t, addr, "--json", "bench", "--rooms", "50", "--concurrency", "8", "--commands", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	sent := map[string][]string{}
	for _, c := range b.got {
		if cr := c.GetCreateRoom(); cr != nil {
			sent[cr.RoomId] = append(sent[cr.RoomId], cr.CommandId)
		}
	}
	if len(sent) != 50 {
		t.Fatalf("creates reached %d rooms, want 50", len(sent))
	}
	for r, ids := range sent {
		if len(ids) != 2 || ids[0] != ids[1] {
			t.Fatalf("room %s: creates %v, want one retry with the same command_id", r, ids)
		}
	}
}

// A refusal's RetryInfo is honoured: the retry waits at least its delay
// (capped at 2 s), never the bare 50 ms; a refusal without one is retried
// after 50 ms. Either way the retry happens and is counted.
func TestBenchRetryWaitsTheRefusalsRetryInfo(t *testing.T) {
	refusal := func(d time.Duration) error {
		st := status.New(codes.Unavailable, "temporarily unavailable; retry with the same command_id")
		if d > 0 {
			st, _ = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		}
		return st.Err()
	}
	for _, tc := range []struct {
		name     string
		hint     time.Duration
		min, max time.Duration
	}{
		{"no RetryInfo", 0, 50 * time.Millisecond, 2 * time.Second},
		{"RetryInfo 400ms", 400 * time.Millisecond, 400 * time.Millisecond, 3 * time.Second},
		{"RetryInfo 1m (capped)", time.Minute, 2 * time.Second, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var retried atomic.Int64
			var sent []time.Time
			err := withRetry(&retried, func() error {
				sent = append(sent, time.Now())
				if len(sent) == 1 {
					return refusal(tc.hint)
				}
				return nil
			})
			if err != nil || len(sent) != 2 || retried.Load() != 1 {
				t.Fatalf("err %v after %d calls, %d retried; want one retry that succeeds", err, len(sent), retried.Load())
			}
			if gap := sent[1].Sub(sent[0]); gap < tc.min || gap > tc.max {
				t.Fatalf("retried after %s; want %s to %s", gap, tc.min, tc.max)
			}
		})
	}
}
