package room

import "slices"

// RuleErrors exposes the registered rule errors to the external tests.
func RuleErrors() []error { return slices.Clone(ruleErrors) }

// ApplyInPlace is the grain's in-place apply, for the property test.
func ApplyInPlace(s *State, seq int64, events []Event) { s.applyCommand(seq, events) }
