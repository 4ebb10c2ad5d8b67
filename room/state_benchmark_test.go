package room_test

import (
	"fmt"
	"testing"

	"github.com/hyapp/roomcell/room"
)

// fiftyMembers is an open room with the owner and 49 listeners, 8 seats,
// heat, one live ban: a busy room of a voice-chat app.
func fiftyMembers(b *testing.B) room.State {
	cmds := []room.Command{create("owner", admins("admin"))}
	cmds = append(cmds, join("admin"))
	for i := range 48 {
		cmds = append(cmds, join(fmt.Sprintf("listener%02d", i)))
	}
	cmds = append(cmds, takeMic("owner", 0), takeMic("admin", 1), gift("listener00", "owner", 10, 1000),
		join("troll"), kick("owner", "troll", ban(3600)))
	return given(b, cmds...)
}

// visitorScript is what a visitor does: come in, take a seat, send a gift,
// get off the mic, leave. Five commands; eight visitors at different steps
// keep six seats busy.
func visitorScript(visitor string, seat int, now int64) []room.Command {
	return []room.Command{
		join(visitor, at(now)),
		takeMic(visitor, seat, at(now)),
		gift(visitor, "owner", 1, 10, at(now)),
		releaseMic(visitor, at(now)),
		leave(visitor, at(now)),
	}
}

// BenchmarkDecideApply measures the pure state machine: Decide, then
// ApplyCommand (which copies the state). The grain applies in place
// (BenchmarkDecideApplyInPlace).
func BenchmarkDecideApply(b *testing.B) { benchDecideApply(b, false) }

// BenchmarkDecideApplyInPlace: Decide, then the in-place apply the grain
// runs once a command is stored.
func BenchmarkDecideApplyInPlace(b *testing.B) { benchDecideApply(b, true) }

func benchDecideApply(b *testing.B, inPlace bool) {
	s := fiftyMembers(b)
	const visitors = 6
	var script []room.Command
	for step := range 5 {
		for v := range visitors {
			script = append(script, visitorScript(fmt.Sprintf("visitor%d", v), 2+v, t0+10_000)[step])
		}
	}
	n := 0
	for b.Loop() {
		c := script[n%len(script)]
		evs, err := room.Decide(s, c)
		if err != nil {
			b.Fatalf("%s by %s: %v", c.Type, c.UserID, err)
		}
		if inPlace {
			s.ApplyInPlace(s.Seq+1, evs)
		} else {
			s = room.ApplyCommand(s, s.Seq+1, evs)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "commands/s")
}

func BenchmarkSnapshotMarshal(b *testing.B) {
	s := fiftyMembers(b)
	var size int
	for b.Loop() {
		buf, err := s.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		size = len(buf)
	}
	b.ReportMetric(float64(size), "bytes/snapshot")
}

func BenchmarkSnapshotUnmarshal(b *testing.B) {
	buf, err := fiftyMembers(b).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := room.UnmarshalState(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSummary: the room summary every command's reply carries, for
// the fifty-member room (8 seats, two taken).
func BenchmarkSummary(b *testing.B) {
	s := fiftyMembers(b)
	b.ReportAllocs()
	for b.Loop() {
		if v := room.Summary(s); len(v.Seats) != len(s.Seats) || v.Seats[0].UserId != "owner" {
			b.Fatalf("summary seats %v", v.Seats)
		}
	}
}
