package room

import (
	"maps"
	"slices"

	"github.com/hyapp/roomcell/errclass"
)

// Seat moves: an operator takes a user off a seat (they stay in the
// room), a user moves to another seat (or an operator moves them), and
// the room's seat count changes. All of them are told with the seat
// events clients already know (RoomMicReleased, RoomMicTaken), with a
// reason, so a seat is freed before it is taken whatever the path.
const (
	ReasonKickedOffSeat = "kicked_off_seat"
	ReasonMoved         = "moved"
	ReasonSeatRemoved   = "seat_removed"
	// ReasonDisplaced: a forced move took the holder off their seat.
	ReasonDisplaced = "displaced"
	// ReasonSwapped: two users traded seats in one move.
	ReasonSwapped = "swapped"
	// OutcomeSeatRemoved: a request for a seat the room no longer has.
	OutcomeSeatRemoved = "seat_removed"
)

// decideKickOffSeat: an operator frees the seat target holds; the target
// stays in the room. Only the owner takes an admin off a seat, and nobody
// the owner.
func decideKickOffSeat(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if cmd.TargetUserID != cmd.UserID {
		if cmd.TargetUserID == s.Owner {
			return nil, ErrKickOwner
		}
		if cmd.UserID != s.Owner && s.IsAdmin(cmd.TargetUserID) {
			return nil, ErrKickAdmin
		}
	}
	seat := s.SeatOf(cmd.TargetUserID)
	if seat < 0 {
		return nil, ErrNotSeated
	}
	return []Event{RoomMicReleased{UserID: cmd.TargetUserID, Seat: seat, Reason: ReasonKickedOffSeat}}, nil
}

// moveTarget is who MoveSeat moves: target_user_id, or the sender.
func moveTarget(cmd Command) string {
	if cmd.TargetUserID != "" {
		return cmd.TargetUserID
	}
	return cmd.UserID
}

// What MoveSeat does when the seat is taken (Command.MovePolicy).
const (
	MoveAbort = "abort" // refuse: ErrSeatTaken (also "")
	MoveForce = "force" // take the holder off the seat first
	MoveSwap  = "swap"  // the holder moves to the mover's seat
)

func checkMove(cmd Command) error {
	if cmd.TargetUserID != "" {
		if err := checkTarget(cmd); err != nil {
			return err
		}
	}
	switch cmd.MovePolicy {
	case "", MoveAbort, MoveForce, MoveSwap:
	default:
		return errclass.Invalidf("policy must be %q, %q or %q, got %q", MoveAbort, MoveForce, MoveSwap, cmd.MovePolicy)
	}
	return checkSeat(cmd)
}

// displace checks that the operator may move holder off their seat (as
// KickOffSeat would): an operator; nobody moves the owner but the owner;
// only the owner moves an admin.
func displace(s State, operator, holder string) error {
	if err := checkOperator(s, operator); err != nil {
		return err
	}
	if holder == operator {
		return nil
	}
	if holder == s.Owner {
		return ErrKickOwner
	}
	if operator != s.Owner && s.IsAdmin(holder) {
		return ErrKickAdmin
	}
	return nil
}

// decideMoveSeat: a seated user moves to a free, unlocked seat; moving
// someone else is an operator's (as kicking them off is). In apply mode a
// member moves only through an operator, as they take a seat.
func decideMoveSeat(s State, cmd Command) ([]Event, error) {
	user := moveTarget(cmd)
	if user != cmd.UserID {
		if _, err := decideKickOffSeat(s, Command{UserID: cmd.UserID, TargetUserID: user}); err != nil {
			return nil, err
		}
	} else if !s.IsMember(user) {
		return nil, ErrNotMember
	}
	from := s.SeatOf(user)
	if from < 0 {
		return nil, ErrNotSeated
	}
	if err := seatInRoom(s, cmd.Seat); err != nil {
		return nil, err
	}
	if from == cmd.Seat {
		return nil, nil
	}
	holder := s.Seats[cmd.Seat]
	if holder != "" && (cmd.MovePolicy == MoveForce || cmd.MovePolicy == MoveSwap) {
		return decideMoveOnto(s, cmd, user, from, holder)
	}
	if err := seatFree(s, cmd.Seat); err != nil {
		return nil, err
	}
	if user == cmd.UserID && s.seatMode() == SeatModeApply && checkOperator(s, user) != nil {
		return nil, ErrApplyRequired
	}
	return []Event{
		RoomMicReleased{UserID: user, Seat: from, Reason: ReasonMoved},
		RoomMicTaken{UserID: user, Seat: cmd.Seat},
	}, nil
}

// decideMoveOnto moves user from seat from onto the seat holder holds:
// force takes the holder off first (they stay in the room), swap seats
// the holder on from. Every seat is released before it is taken, in one
// command, so no reader of the log ever sees two users on a seat or one
// user on two. A taken seat is never locked (locking frees it).
func decideMoveOnto(s State, cmd Command, user string, from int, holder string) ([]Event, error) {
	if err := displace(s, cmd.UserID, holder); err != nil {
		return nil, err
	}
	if cmd.MovePolicy == MoveForce {
		return []Event{
			RoomMicReleased{UserID: holder, Seat: cmd.Seat, Reason: ReasonDisplaced},
			RoomMicReleased{UserID: user, Seat: from, Reason: ReasonMoved},
			RoomMicTaken{UserID: user, Seat: cmd.Seat},
		}, nil
	}
	return []Event{
		RoomMicReleased{UserID: user, Seat: from, Reason: ReasonSwapped},
		RoomMicReleased{UserID: holder, Seat: cmd.Seat, Reason: ReasonSwapped},
		RoomMicTaken{UserID: user, Seat: cmd.Seat},
		RoomMicTaken{UserID: holder, Seat: from},
	}, nil
}

func checkSeatCount(cmd Command) error {
	if cmd.MicSeats < 1 || cmd.MicSeats > MaxMicSeats {
		return errclass.Invalidf("mic_seats must be between 1 and %d, got %d", MaxMicSeats, cmd.MicSeats)
	}
	return nil
}

// decideSetSeatCount: an operator changes how many seats the room has.
// Shrinking frees the removed seats first (RoomMicReleased, reason
// seat_removed; their users stay in the room) and ends the requests for
// them, so RoomSeatCountChanged never drops a seated user silently.
func decideSetSeatCount(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if cmd.MicSeats == len(s.Seats) {
		return nil, nil
	}
	var evs []Event
	for i := cmd.MicSeats; i < len(s.Seats); i++ {
		if u := s.Seats[i]; u != "" {
			evs = append(evs, RoomMicReleased{UserID: u, Seat: i, Reason: ReasonSeatRemoved})
		}
	}
	for _, u := range slices.Sorted(maps.Keys(s.Applications())) {
		if a := s.Applications()[u]; a.Seat >= cmd.MicSeats {
			evs = append(evs, RoomSeatApplicationEnded{UserID: u, Seat: a.Seat, Outcome: OutcomeSeatRemoved})
		}
	}
	for _, u := range slices.Sorted(maps.Keys(s.Invitations())) {
		if inv := s.Invitations()[u]; inv.Seat >= cmd.MicSeats {
			evs = append(evs, RoomSeatInvitationEnded{UserID: u, Seat: inv.Seat, Outcome: OutcomeSeatRemoved})
		}
	}
	evs = append(evs, RoomSeatCountChanged{MicSeats: cmd.MicSeats, OperatorUserID: cmd.UserID})
	return append(evs, addedSeatsMuted(s, cmd)...), nil
}

// RoomSeatCountChanged: the room has MicSeats seats now. Added seats are
// free, unmuted and unlocked; the marks of removed seats go with them.
type RoomSeatCountChanged struct {
	MicSeats       int    `json:"mic_seats"`
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomSeatCountChanged) EventType() string { return TypeRoomSeatCountChanged }
func (e RoomSeatCountChanged) apply(s *State) {
	n := max(e.MicSeats, 0)
	if n <= len(s.Seats) {
		s.Seats = s.Seats[:n:n] // a copy on the next growth, never shared with a clone
	} else {
		s.Seats = append(s.Seats, make([]string, n-len(s.Seats))...)
	}
	gone := func(i int) bool { return i >= n }
	s.MutedSeats = slices.DeleteFunc(s.MutedSeats, gone)
	s.LockedSeats = slices.DeleteFunc(s.LockedSeats, gone)
	if s.Extra != nil {
		s.Extra.MutedByAll = slices.DeleteFunc(s.Extra.MutedByAll, gone)
	}
}
