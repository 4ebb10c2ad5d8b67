package roomgrain

import (
	"context"
	"testing"
	"time"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
	"github.com/hyapp/roomcell/room"
)

func rcAudio(id, user, kind string, atMs, graceMs int64) *v1.RoomCommand {
	return wrap(&v1.AudioPresenceRequest{CommandId: id, AppCode: "app", RoomId: "r1", UserId: user, Kind: kind, EventTimeMs: atMs, SeatGraceMs: graceMs})
}

// audioReleases counts the seats the room released for a lost audio.
func audioReleases(t *testing.T, f *fixture) int {
	t.Helper()
	recs, err := f.store.LoadCommands(context.Background(), grainKey, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		evs, err := decodeEvents(r.Events)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if m, ok := e.(room.RoomMicReleased); ok && m.Reason == room.ReasonAudioLeft {
				n++
			}
		}
	}
	return n
}

// A seated member whose audio dropped loses the seat once, by the room's
// own deadline, within the grace plus a second of the exit's event time,
// with nobody sending anything; the same exit reported again changes
// nothing. A member who re-enters within the grace keeps the seat.
func TestAudioExitFreesTheSeatAfterTheGrace(t *testing.T) {
	f := newFixture(t)
	pid := f.activate("app/r1")
	f.mustDo(pid, rcCreate("c1", "owner"))
	f.mustDo(pid, rcJoin("j1", "alice"))
	f.mustDo(pid, rcJoin("j2", "bob"))
	f.mustDo(pid, wrap(&v1.TakeMicRequest{CommandId: "m1", AppCode: "app", RoomId: "r1", UserId: "alice", Seat: 1}))
	f.mustDo(pid, wrap(&v1.TakeMicRequest{CommandId: "m2", AppCode: "app", RoomId: "r1", UserId: "bob", Seat: 2}))
	const grace = 400
	exitAt := time.Now().UnixMilli()
	f.mustDo(pid, rcAudio("trtc-a", "alice", room.AudioExit, exitAt, grace))
	f.mustDo(pid, rcAudio("trtc-b", "bob", room.AudioExit, exitAt, grace))
	f.mustDo(pid, rcAudio("trtc-b2", "bob", room.AudioEnter, exitAt+100, grace)) // bob is back within the grace
	if r := f.mustDo(pid, rcAudio("trtc-a", "alice", room.AudioExit, exitAt, grace)); !r.Duplicate {
		t.Fatal("a retried report was not answered as a duplicate")
	}
	waitFor(t, func() bool { return audioReleases(t, f) == 1 })
	if late := time.Now().UnixMilli() - exitAt; late > grace+1000 {
		t.Fatalf("seat freed %d ms after the exit, want within the grace (%d ms) + 1 s", late, grace)
	}
	time.Sleep(2 * grace * time.Millisecond)
	if n := audioReleases(t, f); n != 1 {
		t.Fatalf("%d audio releases, want exactly alice's", n)
	}
	seats := f.mustDo(pid, rcGet()).Room.GetSeats()
	if seats[1].GetUserId() != "" || seats[2].GetUserId() != "bob" {
		t.Fatalf("seats %v: alice's must be free, bob's kept", seats)
	}
}
