package room

// Apply returns the state after event e. It never changes s and never
// fails: events are facts that Decide already checked.
func Apply(s State, e Event) State {
	n := s.Clone()
	apply(&n, e)
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
		delete(s.Bans, e.UserID) // an expired ban is forgotten on rejoin
	case RoomUserLeft:
		delete(s.Members, e.UserID)
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
		if i := s.SeatOf(e.TargetUserID); i >= 0 {
			s.Seats[i] = ""
		}
		if e.BanUntilMs > 0 {
			if s.Bans == nil {
				s.Bans = map[string]int64{}
			}
			s.Bans[e.TargetUserID] = e.BanUntilMs
		}
	case RoomClosed:
		s.Status = StatusClosed
		for i := range s.Seats {
			s.Seats[i] = ""
		}
	case RoomRankChanged:
	}
}
