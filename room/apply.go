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
// seq, leaving s as it was: the pure form of ApplyInPlace, for tests and
// tools. Each event's effect is its apply method (event.go).
func ApplyCommand(s State, seq int64, events []Event) State {
	n := s.Clone()
	n.ApplyInPlace(seq, events)
	return n
}

// ApplyInPlace changes s to the state after the events of the command that
// took seq. The grain runs it on its own state once the command's append
// has committed, and on replay (from the log): one path for both, so the
// two cannot drift apart, and no copy of the member map per command. The
// caller owns s: nothing else may hold its maps or slices (the directory
// worker's read of the members is locked, see grain.applyCommitted).
func (s *State) ApplyInPlace(seq int64, events []Event) {
	for _, e := range events {
		e.apply(s)
	}
	s.Seq = seq
	s.canonical()
}
