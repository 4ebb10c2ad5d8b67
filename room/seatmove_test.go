package room_test

import (
	"testing"

	"github.com/hyapp/roomcell/errclass"

	"github.com/hyapp/roomcell/room"
)

func kickOffSeat(op, target string) room.Command {
	return cmd(room.CmdKickOffSeat, op, withTarget(target))
}
func moveSeat(user string, seat int, opts ...opt) room.Command {
	return cmd(room.CmdMoveSeat, user, append([]opt{func(c *room.Command) { c.Seat = seat }}, opts...)...)
}
func policy(p string) opt                     { return func(c *room.Command) { c.MovePolicy = p } }
func seatCount(op string, n int) room.Command { return cmd(room.CmdSetSeatCount, op, seats(n)) }

func released(user string, seat int, reason string) room.Event {
	return room.RoomMicReleased{UserID: user, Seat: seat, Reason: reason}
}

func seatMoveRules() []rule {
	return []rule{
		// KickOffSeat
		{name: "kick off seat: an admin frees a member's seat, the member stays", given: then(aRoom, takeMic("alice", 3)), cmd: kickOffSeat("admin", "alice"),
			want: []room.Event{released("alice", 3, room.ReasonKickedOffSeat)}},
		{name: "kick off seat: the owner takes an admin off", given: then(aRoom, takeMic("admin2", 3)), cmd: kickOffSeat("owner", "admin2"),
			want: []room.Event{released("admin2", 3, room.ReasonKickedOffSeat)}},
		{name: "kick off seat: an admin may not take another admin off", given: then(aRoom, takeMic("admin2", 3)), cmd: kickOffSeat("admin", "admin2"),
			err: room.ErrKickAdmin, class: errclass.Permission},
		{name: "kick off seat: nobody takes the owner off", given: then(aRoom, takeMic("owner", 3)), cmd: kickOffSeat("admin", "owner"),
			err: room.ErrKickOwner, class: errclass.Precondition},
		{name: "kick off seat: target not seated", given: aRoom, cmd: kickOffSeat("owner", "alice"), err: room.ErrNotSeated, class: errclass.Precondition},
		{name: "kick off seat: a member may not", given: then(aRoom, takeMic("alice", 3)), cmd: kickOffSeat("bob", "alice"), err: room.ErrNotOwner, class: errclass.Permission},
		invalid("kick off seat: no target", aRoom, kickOffSeat("owner", ""), "target_user_id"),

		// MoveSeat
		{name: "move: a seated member moves to a free seat", given: then(aRoom, takeMic("alice", 3)), cmd: moveSeat("alice", 5),
			want: []room.Event{released("alice", 3, room.ReasonMoved), room.RoomMicTaken{UserID: "alice", Seat: 5}}},
		{name: "move: to the seat one holds is a no-op", given: then(aRoom, takeMic("alice", 3)), cmd: moveSeat("alice", 3)},
		{name: "move: to a taken seat", given: then(aRoom, takeMic("alice", 3), takeMic("bob", 5)), cmd: moveSeat("alice", 5), err: room.ErrSeatTaken, class: errclass.Precondition},
		{name: "move: to a locked seat", given: then(aRoom, takeMic("alice", 3), lockSeat("owner", 5)), cmd: moveSeat("alice", 5), err: room.ErrSeatLocked, class: errclass.Precondition},
		{name: "move: not seated", given: aRoom, cmd: moveSeat("alice", 5), err: room.ErrNotSeated, class: errclass.Precondition},
		{name: "move: not a member", given: aRoom, cmd: moveSeat("carol", 5), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "move: in apply mode a member may not move alone", given: then(aRoom, takeMic("alice", 3), seatMode("owner", room.SeatModeApply)), cmd: moveSeat("alice", 5),
			err: room.ErrApplyRequired, class: errclass.Precondition},
		{name: "move: an admin moves a member", given: then(aRoom, takeMic("alice", 3), seatMode("owner", room.SeatModeApply)), cmd: moveSeat("admin", 6, withTarget("alice")),
			want: []room.Event{released("alice", 3, room.ReasonMoved), room.RoomMicTaken{UserID: "alice", Seat: 6}}},
		{name: "move: a member may not move another", given: then(aRoom, takeMic("alice", 3)), cmd: moveSeat("bob", 6, withTarget("alice")),
			err: room.ErrNotOwner, class: errclass.Permission},
		invalid("move: seat out of the room", then(aRoom, takeMic("alice", 3)), moveSeat("alice", 8), "seat"),
		// Policies for a taken seat.
		{name: "move abort: a taken seat is refused", given: then(aRoom, takeMic("alice", 3), takeMic("bob", 5)), cmd: moveSeat("admin", 5, withTarget("alice"), policy(room.MoveAbort)),
			err: room.ErrSeatTaken, class: errclass.Precondition},
		{name: "move force: the holder is taken off (displaced), then the move", given: then(aRoom, takeMic("alice", 3), takeMic("bob", 5)), cmd: moveSeat("admin", 5, withTarget("alice"), policy(room.MoveForce)),
			want: []room.Event{released("bob", 5, room.ReasonDisplaced), released("alice", 3, room.ReasonMoved), room.RoomMicTaken{UserID: "alice", Seat: 5}}},
		{name: "move swap: both released, both taken", given: then(aRoom, takeMic("alice", 3), takeMic("bob", 5)), cmd: moveSeat("admin", 5, withTarget("alice"), policy(room.MoveSwap)),
			want: []room.Event{released("alice", 3, room.ReasonSwapped), released("bob", 5, room.ReasonSwapped),
				room.RoomMicTaken{UserID: "alice", Seat: 5}, room.RoomMicTaken{UserID: "bob", Seat: 3}}},
		{name: "move swap: an operator swaps themself with a member", given: then(aRoom, takeMic("admin", 1), takeMic("bob", 5)), cmd: moveSeat("admin", 5, policy(room.MoveSwap)),
			want: []room.Event{released("admin", 1, room.ReasonSwapped), released("bob", 5, room.ReasonSwapped),
				room.RoomMicTaken{UserID: "admin", Seat: 5}, room.RoomMicTaken{UserID: "bob", Seat: 1}}},
		{name: "move force: onto a free seat is a plain move", given: then(aRoom, takeMic("alice", 3)), cmd: moveSeat("alice", 4, policy(room.MoveForce)),
			want: []room.Event{released("alice", 3, room.ReasonMoved), room.RoomMicTaken{UserID: "alice", Seat: 4}}},
		{name: "move force: a member may not displace", given: then(aRoom, takeMic("alice", 3), takeMic("bob", 5)), cmd: moveSeat("alice", 5, policy(room.MoveForce)),
			err: room.ErrNotOwner, class: errclass.Permission},
		{name: "move swap: a member may not swap", given: then(aRoom, takeMic("alice", 3), takeMic("bob", 5)), cmd: moveSeat("alice", 5, policy(room.MoveSwap)),
			err: room.ErrNotOwner, class: errclass.Permission},
		{name: "move force: nobody displaces the owner", given: then(aRoom, takeMic("alice", 3), takeMic("owner", 5)), cmd: moveSeat("admin", 5, withTarget("alice"), policy(room.MoveForce)),
			err: room.ErrKickOwner, class: errclass.Precondition},
		{name: "move swap: an admin may not move another admin off", given: then(aRoom, takeMic("alice", 3), takeMic("admin2", 5)), cmd: moveSeat("admin", 5, withTarget("alice"), policy(room.MoveSwap)),
			err: room.ErrKickAdmin, class: errclass.Permission},
		{name: "move force: the owner displaces an admin", given: then(aRoom, takeMic("alice", 3), takeMic("admin2", 5)), cmd: moveSeat("owner", 5, withTarget("alice"), policy(room.MoveForce)),
			want: []room.Event{released("admin2", 5, room.ReasonDisplaced), released("alice", 3, room.ReasonMoved), room.RoomMicTaken{UserID: "alice", Seat: 5}}},
		{name: "move force: onto a locked seat is refused", given: then(aRoom, takeMic("alice", 3), lockSeat("owner", 5)), cmd: moveSeat("admin", 5, withTarget("alice"), policy(room.MoveForce)),
			err: room.ErrSeatLocked, class: errclass.Precondition},
		invalid("move: unknown policy", then(aRoom, takeMic("alice", 3)), moveSeat("alice", 5, policy("shove")), "policy"),

		// SetSeatCount
		{name: "seat count: grow", given: aRoom, cmd: seatCount("owner", 12),
			want: []room.Event{room.RoomSeatCountChanged{MicSeats: 12, OperatorUserID: "owner"}}},
		{name: "seat count: the same is a no-op", given: aRoom, cmd: seatCount("admin", 8)},
		{name: "seat count: shrink frees the removed seats and ends their requests first",
			given: then(aRoom, takeMic("alice", 6), takeMic("bob", 1), seatMode("owner", room.SeatModeApply), applySeat("admin2", 7), invite("owner", "admin", 2)),
			cmd:   seatCount("owner", 4),
			want: []room.Event{released("alice", 6, room.ReasonSeatRemoved), appEnded("admin2", 7, room.OutcomeSeatRemoved, ""),
				room.RoomSeatCountChanged{MicSeats: 4, OperatorUserID: "owner"}}},
		{name: "seat count: a member may not", given: aRoom, cmd: seatCount("alice", 4), err: room.ErrNotOwner, class: errclass.Permission},
		invalid("seat count: 0", aRoom, seatCount("owner", 0), "mic_seats"),
		invalid("seat count: 21", aRoom, seatCount("owner", room.MaxMicSeats+1), "mic_seats"),
	}
}

// Shrinking drops the marks of removed seats; growing adds free, clear
// seats (no mark comes back from before).
func TestSeatCountKeepsMarksInRange(t *testing.T) {
	s := given(t, then(aRoom, muteSeat("owner", 6), lockSeat("owner", 7), muteSeat("owner", 1), seatCount("owner", 4), seatCount("owner", 8))...)
	v := room.View(s)
	if len(v.Seats) != 8 {
		t.Fatalf("%d seats", len(v.Seats))
	}
	for _, seat := range v.Seats {
		if want := seat.Seat == 1; seat.Muted != want || seat.Locked || seat.UserId != "" {
			t.Errorf("seat %+v after shrink and grow", seat)
		}
	}
}
