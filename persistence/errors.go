package persistence

import "github.com/hyapp/roomcell/errclass"

// Error classes. Backends wrap their driver errors in one of these so the
// room grain can decide between reload, retry and give-up with errors.Is.
// Each is a narrower error of the shared vocabulary, so callers that only
// care about the class ask errors.Is(err, errclass.Unavailable).
var (
	// ErrConflict: the write lost a race (the seq or command_id of the room
	// is already taken, or a lease is held by someone else). Reload, then
	// retry.
	ErrConflict = errclass.Define(errclass.Conflict, "store conflict")
	// ErrUnavailable: the backend could not be reached or timed out. The
	// write may or may not have happened only where a method says so.
	ErrUnavailable = errclass.Define(errclass.Unavailable, "store unavailable")
	// ErrNotFound: no such row.
	ErrNotFound = errclass.Define(errclass.NotFound, "not found")
)
