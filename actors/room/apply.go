package room

// Apply returns the state after event e. It never changes s and never
// fails: events are facts that Decide already checked.
func Apply(s State, e Event) State {
	n := s.Clone()
	e.apply(&n)
	n.canonical()
	return n
}

// ApplyCommand returns the state after the events of the command that took
// seq. It is used both live (after Decide) and on replay (from the log), so
// the two cannot drift apart. Each event's effect is its apply method
// (event.go).
func ApplyCommand(s State, seq int64, events []Event) State {
	n := s.Clone()
	for _, e := range events {
		e.apply(&n)
	}
	n.Seq = seq
	n.canonical()
	return n
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
	if len(s.MutedSeats) == 0 {
		s.MutedSeats = nil
	}
	if len(s.LockedSeats) == 0 {
		s.LockedSeats = nil
	}
}
