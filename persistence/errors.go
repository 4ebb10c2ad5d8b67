package persistence

import "errors"

// Error classes. Backends wrap their driver errors in one of these so the
// room grain can decide between reload, retry and give-up with errors.Is.
var (
	// ErrConflict: the write lost a race (the seq or command_id of the room
	// is already taken, or a lease is held by someone else). Reload, then
	// retry.
	ErrConflict = errors.New("store conflict")
	// ErrUnavailable: the backend could not be reached or timed out. The
	// write may or may not have happened only where a method says so.
	ErrUnavailable = errors.New("store unavailable")
	// ErrNotFound: no such row.
	ErrNotFound = errors.New("not found")
)
