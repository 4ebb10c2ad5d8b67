package room_test

import (
	"testing"

	"github.com/hyapp/roomcell/errclass"
	"github.com/hyapp/roomcell/room"
)

func allMics(op string, muted bool) room.Command {
	return cmd(room.CmdSetAllMicsMuted, op, func(c *room.Command) { c.AllMicsMuted = muted })
}

func allMicsRules() []rule {
	small := then(aRoom, seatCount("owner", 3), takeMic("alice", 0), muteSeat("owner", 2))
	on := then(small, allMics("admin", true))
	muted := func(seat int, user string) room.Event {
		return room.RoomSeatMuted{Seat: seat, UserID: user, OperatorUserID: "admin", All: true}
	}
	return []rule{
		{name: "all mics: on mutes every seat not muted yet", given: small, cmd: allMics("admin", true),
			want: []room.Event{muted(0, "alice"), muted(1, ""), room.RoomAllMicsMutedChanged{Muted: true, OperatorUserID: "admin"}}},
		{name: "all mics: on again is a no-op", given: on, cmd: allMics("owner", true)},
		{name: "all mics: off unmutes what it muted, a seat muted on its own stays", given: on, cmd: allMics("admin", false),
			want: []room.Event{room.RoomSeatUnmuted{Seat: 0, OperatorUserID: "admin"}, room.RoomSeatUnmuted{Seat: 1, OperatorUserID: "admin"},
				room.RoomAllMicsMutedChanged{OperatorUserID: "admin"}}},
		{name: "all mics: a seat unmuted while on is the exception, not unmuted again", given: then(on, unmuteSeat("owner", 0)), cmd: allMics("admin", false),
			want: []room.Event{room.RoomSeatUnmuted{Seat: 1, OperatorUserID: "admin"}, room.RoomAllMicsMutedChanged{OperatorUserID: "admin"}}},
		{name: "all mics: seats added while on come muted", given: on, cmd: seatCount("owner", 5),
			want: []room.Event{room.RoomSeatCountChanged{MicSeats: 5, OperatorUserID: "owner"},
				room.RoomSeatMuted{Seat: 3, OperatorUserID: "owner", All: true}, room.RoomSeatMuted{Seat: 4, OperatorUserID: "owner", All: true}}},
		{name: "all mics: off is a no-op when off", given: small, cmd: allMics("admin", false)},
		{name: "all mics: a member may not", given: small, cmd: allMics("alice", true), err: room.ErrNotOwner, class: errclass.Permission},
	}
}

// The switch's seats follow the room: a removed seat leaves them, and the
// view says the switch is on.
func TestAllMicsState(t *testing.T) {
	s := given(t, then(aRoom, seatCount("owner", 4), allMics("owner", true), seatCount("owner", 2))...)
	if !s.AllMicsMuted() || !room.View(s).AllMicsMuted || !s.SeatMuted(0) || !s.SeatMuted(1) {
		t.Fatalf("switch on: %+v", s.Extra)
	}
	if got := s.Extra.MutedByAll; len(got) != 2 {
		t.Fatalf("muted by the switch %v, want seats 0 and 1", got)
	}
	s = given(t, then(aRoom, seatCount("owner", 4), allMics("owner", true), seatCount("owner", 2), allMics("owner", false))...)
	if s.AllMicsMuted() || s.SeatMuted(0) || s.SeatMuted(1) || s.Extra != nil {
		t.Fatalf("switch off: muted %v, extra %+v", s.MutedSeats, s.Extra)
	}
}
