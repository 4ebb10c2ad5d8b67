package errclass

import (
	"errors"
	"fmt"
	"time"
)

// The classes. A class says what the caller can do about the error, not
// where it came from.
var (
	// Invalid: bad input; the same request can never succeed.
	Invalid = errors.New("invalid argument")
	// NotFound: what the request names does not exist.
	NotFound = errors.New("not found")
	// Exists: what the request would create exists already (a room, a
	// command_id used for another request).
	Exists = errors.New("already exists")
	// Precondition: well formed, but the current state refuses it.
	Precondition = errors.New("failed precondition")
	// Permission: the caller may not do this.
	Permission = errors.New("permission denied")
	// Conflict: a write lost a race (a seq, a lease, a row changed
	// meanwhile); reload and retry.
	Conflict = errors.New("conflict")
	// Unavailable: a dependency is down or timed out; retry with the same
	// command_id (the change may or may not have happened).
	Unavailable = errors.New("unavailable")
	// Exhausted: a quota or a limit refuses it (a rate limit, a full
	// room); nothing changed. A rate limit says when to retry
	// (RetryAfterOf).
	Exhausted = errors.New("resource exhausted")
)

// Names of the classes on the wire (a room's RoomError.class between
// cluster members). Internal is the name of an error in no class.
const (
	NameInvalid      = "invalid_argument"
	NameNotFound     = "not_found"
	NameExists       = "already_exists"
	NamePrecondition = "failed_precondition"
	NamePermission   = "permission_denied"
	NameConflict     = "conflict"
	NameUnavailable  = "unavailable"
	NameExhausted    = "resource_exhausted"
	NameInternal     = "internal"
)

// classes is in lookup order: an error that wraps two classes (a room
// error carrying the wallet error it came from) is in the first one.
var classes = []struct {
	class error
	name  string
}{
	{Invalid, NameInvalid},
	{NotFound, NameNotFound},
	{Exists, NameExists},
	{Precondition, NamePrecondition},
	{Permission, NamePermission},
	{Conflict, NameConflict},
	{Unavailable, NameUnavailable},
	{Exhausted, NameExhausted},
}

// Of returns the class err is in, or nil when it is in none (a bug, or an
// error nobody classified: callers treat it as internal).
func Of(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range classes {
		if errors.Is(err, c.class) {
			return c.class
		}
	}
	return nil
}

// Name returns the wire name of err's class, NameInternal when it has none.
func Name(err error) string {
	class := Of(err)
	for _, c := range classes {
		if c.class == class {
			return c.name
		}
	}
	return NameInternal
}

// FromName returns the class of a wire name, or nil for NameInternal and
// names it does not know.
func FromName(name string) error {
	for _, c := range classes {
		if c.name == name {
			return c.class
		}
	}
	return nil
}

// sentinel is a narrower error of a class with its own text.
type sentinel struct {
	class error
	text  string
}

func (e *sentinel) Error() string { return e.text }
func (e *sentinel) Unwrap() error { return e.class }

// Define returns a new error of class with its own text: errors.Is
// matches both the new error and its class, and its text is text alone
// (not prefixed by the class's). Domains define their sentinels with it,
// and a class error received from another process is rebuilt with it.
func Define(class error, text string) error { return &sentinel{class: class, text: text} }

// Errorf returns "<class or sentinel text>: <detail>" wrapping class (a
// class or any sentinel of one).
func Errorf(class error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{class}, args...)...)
}

// retryAfter is an error with the time after which a retry may succeed.
type retryAfter struct {
	error
	after time.Duration
}

func (e *retryAfter) Unwrap() error { return e.error }

// WithRetryAfter returns err saying a retry may succeed after d (the gRPC
// layer sends it as a google.rpc.RetryInfo detail).
func WithRetryAfter(err error, d time.Duration) error { return &retryAfter{error: err, after: d} }

// RetryAfterOf returns the retry-after err carries, if any.
func RetryAfterOf(err error) (time.Duration, bool) {
	var r *retryAfter
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

// withMeta is an error with facts for a client (google.rpc.ErrorInfo
// metadata): who removed a user and when, which database is down.
type withMeta struct {
	error
	meta map[string]string
}

func (e *withMeta) Unwrap() error { return e.error }

// WithMeta returns err carrying meta, the keys of its code's row in
// errors.json (Row.Metadata); err's text, class and code are unchanged.
func WithMeta(err error, meta map[string]string) error {
	return &withMeta{error: err, meta: meta}
}

// MetaOf returns the facts err carries (WithMeta), nil when none.
func MetaOf(err error) map[string]string {
	var m *withMeta
	if errors.As(err, &m) {
		return m.meta
	}
	return nil
}
