package room

import "slices"

// RuleErrors exposes the registered rule errors to the external tests.
func RuleErrors() []error { return slices.Clone(ruleErrors) }
