package room

import "maps"

// Apply returns the state after event e. It never changes s and never
// fails: events are facts that Decide already checked.
func Apply(s State, e Event) State {
	n := s.Clone()
	apply(&n, e)
	n.canonical()
	return n
}

// ApplyCommand returns the state after the events of the command that took
// seq. It is used both live (after Decide) and on replay (from the log), so
// the two cannot drift apart.
func ApplyCommand(s State, seq int64, events []Event) State {
	n := s.Clone()
	for _, e := range events {
		apply(&n, e)
	}
	n.Seq = seq
	n.canonical()
	return n
}

func apply(s *State, e Event) {
	switch e := e.(type) {
	case RoomCreated:
		s.Exists = true
		s.Owner = e.OwnerUserID
		s.Name = e.Name
		s.Status = StatusOpen
		s.Admins = append([]string(nil), e.AdminUserIDs...)
		s.Seats = make([]string, e.MicSeats)
		s.CreatedAtMs = e.CreatedAtMs
	case RoomUserJoined:
		if s.Members == nil {
			s.Members = map[string]int64{}
		}
		s.Members[e.UserID] = e.JoinedAtMs
		// A join carries the decision time, so bans that ended by then can
		// go: it keeps the snapshot from growing with every kick ever made,
		// and replay prunes at the same events.
		maps.DeleteFunc(s.Bans, func(u string, until int64) bool {
			return u == e.UserID || until <= e.JoinedAtMs
		})
	case RoomUserLeft:
		delete(s.Members, e.UserID)
		s.vacate(e.UserID) // Decide released it already; keeps "seated ⇒ member" whatever the log says
	case RoomMicTaken:
		if e.Seat >= 0 && e.Seat < len(s.Seats) {
			s.Seats[e.Seat] = e.UserID
		}
	case RoomMicReleased:
		if e.Seat >= 0 && e.Seat < len(s.Seats) && s.Seats[e.Seat] == e.UserID {
			s.Seats[e.Seat] = ""
		}
	case RoomGiftSent:
		// Heat moves with RoomHeatChanged; the gift itself changes nothing.
	case RoomHeatChanged:
		s.Heat = e.Heat
	case RoomUserKicked:
		delete(s.Members, e.TargetUserID)
		s.vacate(e.TargetUserID)
		if e.BanUntilMs > 0 {
			if s.Bans == nil {
				s.Bans = map[string]int64{}
			}
			s.Bans[e.TargetUserID] = e.BanUntilMs
		}
	case RoomClosed:
		// A closed room has nobody in it: RoomClosed stands for every
		// seat release and leave (IM clients drop the room on it), so
		// GetRoom shows it empty.
		s.Status = StatusClosed
		for i := range s.Seats {
			s.Seats[i] = ""
		}
		s.Members = nil
	case RoomRankChanged:
	}
}

// vacate frees every seat user holds.
func (s *State) vacate(user string) {
	for i, u := range s.Seats {
		if u == user {
			s.Seats[i] = ""
		}
	}
}

// canonical makes equal rooms equal values: an empty map or list is nil,
// as it is after a snapshot round trip (the fields are omitempty), so a
// replayed state compares equal to the live one with ==-style checks.
func (s *State) canonical() {
	if len(s.Members) == 0 {
		s.Members = nil
	}
	if len(s.Bans) == 0 {
		s.Bans = nil
	}
	if len(s.Admins) == 0 {
		s.Admins = nil
	}
	if len(s.Seats) == 0 {
		s.Seats = nil
	}
}
