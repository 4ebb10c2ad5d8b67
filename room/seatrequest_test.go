package room_test

import (
	"testing"

	"github.com/hyapp/roomcell/errclass"

	"github.com/hyapp/roomcell/room"
)

func seatMode(op, mode string) room.Command {
	return cmd(room.CmdSetSeatMode, op, set(func(c *room.Command) { c.SeatMode = mode }))
}
func timeout(secs int64) opt { return func(c *room.Command) { c.TimeoutSeconds = secs } }
func applySeat(user string, seat int, opts ...opt) room.Command {
	return cmd(room.CmdApplySeat, user, append([]opt{func(c *room.Command) { c.Seat = seat }}, opts...)...)
}
func cancelApp(user string, opts ...opt) room.Command {
	return cmd(room.CmdCancelSeatApplication, user, opts...)
}
func approve(op, target string, opts ...opt) room.Command {
	return cmd(room.CmdApproveSeatApplication, op, append([]opt{withTarget(target)}, opts...)...)
}
func reject(op, target string, opts ...opt) room.Command {
	return cmd(room.CmdRejectSeatApplication, op, append([]opt{withTarget(target)}, opts...)...)
}
func invite(op, target string, seat int, opts ...opt) room.Command {
	return cmd(room.CmdInviteToSeat, op, append([]opt{withTarget(target), func(c *room.Command) { c.Seat = seat }}, opts...)...)
}
func accept(user string, opts ...opt) room.Command {
	return cmd(room.CmdAcceptSeatInvitation, user, opts...)
}
func decline(user string, opts ...opt) room.Command {
	return cmd(room.CmdDeclineSeatInvitation, user, opts...)
}
func expire(opts ...opt) room.Command {
	return cmd(room.CmdExpireSeatRequests, "room", append([]opt{commandID("seat-expire-1")}, opts...)...)
}

// anApplyRoom: aRoom in apply mode.
var anApplyRoom = then(aRoom, seatMode("owner", room.SeatModeApply))

const dl = t0 + room.DefaultSeatRequestSeconds*1000 // a request's default deadline made at t0

func appEnded(user string, seat int, outcome, op string) room.Event {
	return room.RoomSeatApplicationEnded{UserID: user, Seat: seat, Outcome: outcome, OperatorUserID: op}
}
func invEnded(user string, seat int, outcome string) room.Event {
	return room.RoomSeatInvitationEnded{UserID: user, Seat: seat, Outcome: outcome}
}

func seatRequestRules() []rule {
	manyApplied := then(anApplyRoom)
	for i := range room.MaxSeatRequests {
		u := "m" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		manyApplied = then(manyApplied, join(u), applySeat(u, 1))
	}
	return []rule{
		// SetSeatMode
		{name: "seat mode: owner sets apply", given: aRoom, cmd: seatMode("owner", room.SeatModeApply),
			want: []room.Event{room.RoomSeatModeChanged{Mode: room.SeatModeApply, OperatorUserID: "owner"}}},
		{name: "seat mode: free is the default (no-op)", given: aRoom, cmd: seatMode("admin", room.SeatModeFree)},
		{name: "seat mode: back to free", given: anApplyRoom, cmd: seatMode("admin", room.SeatModeFree),
			want: []room.Event{room.RoomSeatModeChanged{Mode: room.SeatModeFree, OperatorUserID: "admin"}}},
		{name: "seat mode: a member may not", given: aRoom, cmd: seatMode("alice", room.SeatModeApply), err: room.ErrNotOwner, class: errclass.Permission},
		invalid("seat mode: unknown", aRoom, seatMode("owner", "lottery"), "seat_mode"),

		// TakeMic in apply mode
		{name: "apply mode: a member may not take a seat", given: anApplyRoom, cmd: takeMic("alice", 0), err: room.ErrApplyRequired, class: errclass.Precondition},
		{name: "apply mode: an admin takes a seat", given: anApplyRoom, cmd: takeMic("admin", 0),
			want: []room.Event{room.RoomMicTaken{UserID: "admin", Seat: 0}}},
		{name: "take: ends the user's pending invitation (seated)", given: then(aRoom, invite("owner", "alice", 3)), cmd: takeMic("alice", 0),
			want: []room.Event{room.RoomMicTaken{UserID: "alice", Seat: 0}, invEnded("alice", 3, room.OutcomeSeated)}},

		// ApplySeat
		{name: "apply: a member applies", given: anApplyRoom, cmd: applySeat("alice", 2),
			want: []room.Event{room.RoomSeatApplied{UserID: "alice", Seat: 2, ExpiresAtMs: dl}}},
		{name: "apply: with a timeout", given: anApplyRoom, cmd: applySeat("alice", 2, timeout(5)),
			want: []room.Event{room.RoomSeatApplied{UserID: "alice", Seat: 2, ExpiresAtMs: t0 + 5000}}},
		{name: "apply: again for the same seat is a no-op", given: then(anApplyRoom, applySeat("alice", 2)), cmd: applySeat("alice", 2, at(t0+10))},
		{name: "apply: for another seat while one is pending", given: then(anApplyRoom, applySeat("alice", 2)), cmd: applySeat("alice", 3),
			err: room.ErrAlreadyApplied, class: errclass.Precondition},
		{name: "apply: after the first expired (not yet committed) ends it first", given: then(anApplyRoom, applySeat("alice", 2)), cmd: applySeat("alice", 3, at(dl)),
			want: []room.Event{appEnded("alice", 2, room.OutcomeExpired, ""), room.RoomSeatApplied{UserID: "alice", Seat: 3, ExpiresAtMs: dl + room.DefaultSeatRequestSeconds*1000}}},
		{name: "apply: in free mode", given: aRoom, cmd: applySeat("alice", 2), err: room.ErrSeatsFree, class: errclass.Precondition},
		{name: "apply: not a member", given: anApplyRoom, cmd: applySeat("carol", 2), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "apply: already seated", given: then(aRoom, takeMic("alice", 1), seatMode("owner", room.SeatModeApply)), cmd: applySeat("alice", 2),
			err: room.ErrAlreadySeated, class: errclass.Precondition},
		{name: "apply: for a taken seat", given: then(anApplyRoom, takeMic("admin", 2)), cmd: applySeat("alice", 2), err: room.ErrSeatTaken, class: errclass.Precondition},
		{name: "apply: for a locked seat", given: then(anApplyRoom, lockSeat("owner", 2)), cmd: applySeat("alice", 2), err: room.ErrSeatLocked, class: errclass.Precondition},
		{name: "apply: the room's pending list is full", given: manyApplied, cmd: applySeat("alice", 2), err: room.ErrTooManySeatRequests, class: errclass.Precondition},
		invalid("apply: seat out of the room", anApplyRoom, applySeat("alice", 8), "seat"),
		invalid("apply: timeout too long", anApplyRoom, applySeat("alice", 1, timeout(room.MaxSeatRequestSeconds+1)), "timeout_seconds"),
		invalid("apply: timeout negative", anApplyRoom, applySeat("alice", 1, timeout(-1)), "timeout_seconds"),

		// CancelSeatApplication
		{name: "cancel: the applicant withdraws", given: then(anApplyRoom, applySeat("alice", 2)), cmd: cancelApp("alice"),
			want: []room.Event{appEnded("alice", 2, room.OutcomeCancelled, "")}},
		{name: "cancel: nothing pending", given: anApplyRoom, cmd: cancelApp("alice"), err: room.ErrNoSeatRequest, class: errclass.Precondition},
		{name: "cancel: after the deadline", given: then(anApplyRoom, applySeat("alice", 2)), cmd: cancelApp("alice", at(dl)), err: room.ErrNoSeatRequest, class: errclass.Precondition},

		// ApproveSeatApplication
		{name: "approve: seats the applicant", given: then(anApplyRoom, applySeat("alice", 2)), cmd: approve("admin", "alice"),
			want: []room.Event{appEnded("alice", 2, room.OutcomeApproved, "admin"), room.RoomMicTaken{UserID: "alice", Seat: 2}}},
		{name: "approve: ends the applicant's invitation too", given: then(anApplyRoom, invite("owner", "alice", 5), applySeat("alice", 2)), cmd: approve("admin", "alice"),
			want: []room.Event{appEnded("alice", 2, room.OutcomeApproved, "admin"), room.RoomMicTaken{UserID: "alice", Seat: 2}, invEnded("alice", 5, room.OutcomeSeated)}},
		{name: "approve: the seat was taken meanwhile", given: then(anApplyRoom, applySeat("alice", 2), takeMic("admin", 2)), cmd: approve("owner", "alice"),
			err: room.ErrSeatTaken, class: errclass.Precondition},
		{name: "approve: the seat was locked meanwhile", given: then(anApplyRoom, applySeat("alice", 2), lockSeat("admin", 2)), cmd: approve("owner", "alice"),
			err: room.ErrSeatLocked, class: errclass.Precondition},
		{name: "approve: expired", given: then(anApplyRoom, applySeat("alice", 2, timeout(1))), cmd: approve("owner", "alice", at(t0+1000)),
			err: room.ErrNoSeatRequest, class: errclass.Precondition},
		{name: "approve: a member may not", given: then(anApplyRoom, applySeat("alice", 2)), cmd: approve("bob", "alice"), err: room.ErrNotOwner, class: errclass.Permission},
		{name: "approve: the applicant left (the application ended with it)", given: then(anApplyRoom, applySeat("alice", 2), leave("alice")), cmd: approve("owner", "alice"),
			err: room.ErrNoSeatRequest, class: errclass.Precondition},
		invalid("approve: no target", anApplyRoom, approve("owner", ""), "target_user_id"),

		// RejectSeatApplication
		{name: "reject: an admin says no", given: then(anApplyRoom, applySeat("alice", 2)), cmd: reject("admin", "alice"),
			want: []room.Event{appEnded("alice", 2, room.OutcomeRejected, "admin")}},
		{name: "reject: nothing pending", given: anApplyRoom, cmd: reject("admin", "alice"), err: room.ErrNoSeatRequest, class: errclass.Precondition},
		{name: "reject: a member may not", given: then(anApplyRoom, applySeat("alice", 2)), cmd: reject("bob", "alice"), err: room.ErrNotOwner, class: errclass.Permission},

		// InviteToSeat
		{name: "invite: an admin invites a member", given: aRoom, cmd: invite("admin", "alice", 4, timeout(30)),
			want: []room.Event{room.RoomSeatInvited{UserID: "alice", Seat: 4, OperatorUserID: "admin", ExpiresAtMs: t0 + 30_000}}},
		{name: "invite: works in apply mode", given: anApplyRoom, cmd: invite("owner", "alice", 4),
			want: []room.Event{room.RoomSeatInvited{UserID: "alice", Seat: 4, OperatorUserID: "owner", ExpiresAtMs: dl}}},
		{name: "invite: again to the same seat is a no-op", given: then(aRoom, invite("owner", "alice", 4)), cmd: invite("admin", "alice", 4)},
		{name: "invite: to another seat while one is pending", given: then(aRoom, invite("owner", "alice", 4)), cmd: invite("admin", "alice", 5),
			err: room.ErrAlreadyInvited, class: errclass.Precondition},
		{name: "invite: after the first expired", given: then(aRoom, invite("owner", "alice", 4)), cmd: invite("admin", "alice", 5, at(dl)),
			want: []room.Event{invEnded("alice", 4, room.OutcomeExpired), room.RoomSeatInvited{UserID: "alice", Seat: 5, OperatorUserID: "admin", ExpiresAtMs: dl + room.DefaultSeatRequestSeconds*1000}}},
		{name: "invite: the target is not a member", given: aRoom, cmd: invite("owner", "carol", 4), err: room.ErrNotMember, class: errclass.Precondition},
		{name: "invite: the target is seated", given: then(aRoom, takeMic("alice", 1)), cmd: invite("owner", "alice", 4), err: room.ErrAlreadySeated, class: errclass.Precondition},
		{name: "invite: to a taken seat", given: then(aRoom, takeMic("bob", 4)), cmd: invite("owner", "alice", 4), err: room.ErrSeatTaken, class: errclass.Precondition},
		{name: "invite: a member may not", given: aRoom, cmd: invite("bob", "alice", 4), err: room.ErrNotOwner, class: errclass.Permission},
		invalid("invite: oneself", aRoom, invite("owner", "owner", 4), "target_user_id"),
		invalid("invite: timeout too long", aRoom, invite("owner", "alice", 4, timeout(room.MaxSeatRequestSeconds+1)), "timeout_seconds"),

		// AcceptSeatInvitation / DeclineSeatInvitation
		{name: "accept: the invitee takes the seat", given: then(aRoom, invite("owner", "alice", 4)), cmd: accept("alice"),
			want: []room.Event{invEnded("alice", 4, room.OutcomeAccepted), room.RoomMicTaken{UserID: "alice", Seat: 4}}},
		{name: "accept: in apply mode, ending the invitee's application", given: then(anApplyRoom, applySeat("alice", 1), invite("owner", "alice", 4)), cmd: accept("alice"),
			want: []room.Event{invEnded("alice", 4, room.OutcomeAccepted), room.RoomMicTaken{UserID: "alice", Seat: 4}, appEnded("alice", 1, room.OutcomeSeated, "")}},
		{name: "accept: the seat was taken meanwhile", given: then(aRoom, invite("owner", "alice", 4), takeMic("bob", 4)), cmd: accept("alice"),
			err: room.ErrSeatTaken, class: errclass.Precondition},
		{name: "accept: expired", given: then(aRoom, invite("owner", "alice", 4)), cmd: accept("alice", at(dl)), err: room.ErrNoSeatRequest, class: errclass.Precondition},
		{name: "accept: not invited", given: aRoom, cmd: accept("alice"), err: room.ErrNoSeatRequest, class: errclass.Precondition},
		{name: "decline: the invitee says no", given: then(aRoom, invite("owner", "alice", 4)), cmd: decline("alice"),
			want: []room.Event{invEnded("alice", 4, room.OutcomeDeclined)}},
		{name: "decline: not invited", given: aRoom, cmd: decline("alice"), err: room.ErrNoSeatRequest, class: errclass.Precondition},

		// Ends that come with other commands
		{name: "leave: ends the user's requests first", given: then(anApplyRoom, applySeat("alice", 1), invite("owner", "alice", 4)), cmd: leave("alice"),
			want: []room.Event{appEnded("alice", 1, room.OutcomeLeft, ""), invEnded("alice", 4, room.OutcomeLeft), room.RoomUserLeft{UserID: "alice", Reason: room.ReasonLeft}}},
		{name: "kick: ends the target's requests", given: then(anApplyRoom, applySeat("alice", 1)), cmd: kick("owner", "alice"),
			want: []room.Event{appEnded("alice", 1, room.OutcomeLeft, ""), room.RoomUserKicked{TargetUserID: "alice", OperatorUserID: "owner"}}},
		{name: "close: ends every request", given: then(anApplyRoom, applySeat("alice", 1), applySeat("bob", 2), invite("owner", "admin2", 3)), cmd: closeRoom("owner"),
			want: []room.Event{appEnded("alice", 1, room.OutcomeClosed, ""), appEnded("bob", 2, room.OutcomeClosed, ""), invEnded("admin2", 3, room.OutcomeClosed),
				room.RoomClosed{OperatorUserID: "owner"}}},

		// ExpireSeatRequests (the room's own)
		{name: "expire: ends what is past its deadline, applications first, by user", given: then(anApplyRoom,
			applySeat("bob", 2, timeout(1)), applySeat("alice", 1, timeout(2)), applySeat("admin2", 3, timeout(10)), invite("owner", "bob", 4, timeout(5))),
			cmd:  expire(at(t0 + 2000)),
			want: []room.Event{appEnded("alice", 1, room.OutcomeExpired, ""), appEnded("bob", 2, room.OutcomeExpired, "")}},
		{name: "expire: nothing due is a no-op", given: then(anApplyRoom, applySeat("bob", 2)), cmd: expire(at(dl - 1))},
		{name: "expire: an invitation", given: then(aRoom, invite("owner", "bob", 2, timeout(1))), cmd: expire(at(t0 + 1000)),
			want: []room.Event{invEnded("bob", 2, room.OutcomeExpired)}},
	}
}

// The deadline is in the state: a room rebuilt from its events (or a
// snapshot) knows when its next request runs out.
func TestNextSeatDeadline(t *testing.T) {
	s := given(t, then(anApplyRoom, applySeat("bob", 2, timeout(9)), applySeat("alice", 1, timeout(3)), invite("owner", "admin2", 3, timeout(5)))...)
	if got := s.NextSeatDeadline(); got != t0+3000 {
		t.Fatalf("next deadline %d, want %d", got, t0+3000)
	}
	b, _ := s.Marshal()
	back, err := room.UnmarshalState(b)
	if err != nil || back.NextSeatDeadline() != t0+3000 {
		t.Fatalf("after a snapshot: %d, %v", back.NextSeatDeadline(), err)
	}
	if got := given(t, aRoom...).NextSeatDeadline(); got != 0 {
		t.Fatalf("no requests: %d", got)
	}
}
