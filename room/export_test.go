package room

import "slices"

// RuleErrors exposes the registered rule errors to the external tests.
func RuleErrors() []error { return slices.Clone(ruleErrors) }

// BanNoteCount counts the ban notes kept beside State.Bans.
func BanNoteCount(s State) int { return len(s.x().BanNotes) }

// LikeReceiptFor is likeReceipt, for the tests' expected events.
var LikeReceiptFor = likeReceipt
