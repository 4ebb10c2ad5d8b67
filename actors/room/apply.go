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
