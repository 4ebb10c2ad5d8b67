package room

import "slices"

// All mics muted: a room-wide switch. Turning it on mutes every seat not
// muted yet, each with the seat mute clients and TRTC already obey
// (RoomSeatMuted, marked All); a seat unmuted while it is on is the
// exception it keeps; seats added while it is on come muted. Turning it
// off unmutes the seats it muted that are still muted; seats muted on
// their own stay muted.
const CmdSetAllMicsMuted = "SetAllMicsMuted"

// AllMicsMuted reports whether the switch is on.
func (s State) AllMicsMuted() bool { return s.x().AllMicsMuted }

func decideSetAllMicsMuted(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if cmd.AllMicsMuted == s.AllMicsMuted() {
		return nil, nil
	}
	var evs []Event
	if cmd.AllMicsMuted {
		for i := range s.Seats {
			if !s.SeatMuted(i) {
				evs = append(evs, RoomSeatMuted{Seat: i, UserID: s.Seats[i], OperatorUserID: cmd.UserID, All: true})
			}
		}
	} else {
		for _, i := range s.x().MutedByAll {
			if s.SeatMuted(i) {
				evs = append(evs, RoomSeatUnmuted{Seat: i, OperatorUserID: cmd.UserID})
			}
		}
	}
	return append(evs, RoomAllMicsMutedChanged{Muted: cmd.AllMicsMuted, OperatorUserID: cmd.UserID}), nil
}

// addedSeatsMuted: the seats a growth adds while the switch is on come
// muted by it.
func addedSeatsMuted(s State, cmd Command) []Event {
	if !s.AllMicsMuted() {
		return nil
	}
	var evs []Event
	for i := len(s.Seats); i < cmd.MicSeats; i++ {
		evs = append(evs, RoomSeatMuted{Seat: i, OperatorUserID: cmd.UserID, All: true})
	}
	return evs
}

// RoomAllMicsMutedChanged: the switch is on (Muted) or off; the seat
// events before it in the same command did the muting or unmuting.
type RoomAllMicsMutedChanged struct {
	Muted          bool   `json:"muted"`
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomAllMicsMutedChanged) EventType() string { return TypeRoomAllMicsMutedChanged }
func (e RoomAllMicsMutedChanged) apply(s *State) {
	if !e.Muted && s.Extra == nil {
		return
	}
	x := s.mx()
	x.AllMicsMuted = e.Muted
	if !e.Muted {
		x.MutedByAll = nil
	}
}

// noteMutedByAll keeps the seats the switch muted (seat events' apply).
func (s *State) noteMutedByAll(seat int, muted bool) {
	if muted {
		s.mx().MutedByAll = addSorted(s.mx().MutedByAll, seat)
		return
	}
	if s.Extra != nil {
		s.Extra.MutedByAll = slices.DeleteFunc(s.Extra.MutedByAll, func(i int) bool { return i == seat })
	}
}
