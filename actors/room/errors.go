package room

import (
	"errors"
	"fmt"

	"github.com/hyapp/roomcell/errclass"
)

// Error classes: the shared vocabulary (errclass) under the room's names.
// Every error Decide returns wraps exactly one of them; the gRPC layer maps
// classes to status codes and nothing else looks at text.
var (
	ErrInvalid      = errclass.Invalid
	ErrNotFound     = errclass.NotFound
	ErrExists       = errclass.Exists
	ErrPrecondition = errclass.Precondition
	ErrPermission   = errclass.Permission
	// ErrUnavailable: a dependency (store, wallet) is down or lost a race;
	// the same command_id may be retried.
	ErrUnavailable = errclass.Unavailable
)

// Rule errors: one per broken rule, each in its class.
var (
	ErrRoomNotFound   = fmt.Errorf("%w: room does not exist", ErrNotFound)
	ErrRoomExists     = fmt.Errorf("%w: room already exists", ErrExists)
	ErrRoomClosed     = fmt.Errorf("%w: room is closed", ErrPrecondition)
	ErrNotMember      = fmt.Errorf("%w: user is not a member of the room", ErrPrecondition)
	ErrBanned         = fmt.Errorf("%w: user is banned from the room", ErrPrecondition)
	ErrSeatTaken      = fmt.Errorf("%w: seat is taken", ErrPrecondition)
	ErrAlreadySeated  = fmt.Errorf("%w: user already holds another seat", ErrPrecondition)
	ErrNotSeated      = fmt.Errorf("%w: user holds no seat", ErrPrecondition)
	ErrReceiverAbsent = fmt.Errorf("%w: gift receiver is not a member of the room", ErrPrecondition)
	ErrKickOwner      = fmt.Errorf("%w: the owner cannot be kicked", ErrPrecondition)
	ErrNotOwner       = fmt.Errorf("%w: only the owner or an admin may do this", ErrPermission)
	ErrKickAdmin      = fmt.Errorf("%w: only the owner may kick an admin", ErrPermission)
)

// Class names carried across the cluster in RoomError.class.
const (
	ClassInvalid      = errclass.NameInvalid
	ClassNotFound     = errclass.NameNotFound
	ClassExists       = errclass.NameExists
	ClassPrecondition = errclass.NamePrecondition
	ClassPermission   = errclass.NamePermission
	ClassUnavailable  = errclass.NameUnavailable
	ClassInternal     = errclass.NameInternal
)

var classes = []struct {
	err   error
	class string
}{
	{ErrInvalid, ClassInvalid},
	{ErrNotFound, ClassNotFound},
	{ErrExists, ClassExists},
	{ErrPrecondition, ClassPrecondition},
	{ErrPermission, ClassPermission},
	{ErrUnavailable, ClassUnavailable},
}

// ClassOf returns the class name of err ("internal" when it has none).
func ClassOf(err error) string {
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.class
		}
	}
	return ClassInternal
}

// classError is an error rebuilt from a class name and text received from
// another cluster member; errors.Is matches its class sentinel.
type classError struct {
	class error
	msg   string
}

func (e *classError) Error() string { return e.msg }
func (e *classError) Unwrap() error { return e.class }

var ruleErrors = []error{
	ErrRoomNotFound, ErrRoomExists, ErrRoomClosed, ErrNotMember, ErrBanned, ErrSeatTaken,
	ErrAlreadySeated, ErrNotSeated, ErrReceiverAbsent, ErrKickOwner, ErrNotOwner, ErrKickAdmin,
	ErrMoved,
}

// ErrorFromClass rebuilds an error of the given class with the given text.
// A rule error comes back as its own sentinel, so errors.Is works the same
// whichever member ran the command.
func ErrorFromClass(class, msg string) error {
	for _, r := range ruleErrors {
		if r.Error() == msg && ClassOf(r) == class {
			return r
		}
	}
	for _, c := range classes {
		if c.class == class {
			return &classError{class: c.err, msg: msg}
		}
	}
	return errors.New(msg)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
