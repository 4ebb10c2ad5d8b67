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

// Rule errors: one per broken rule, each in its class. ruleErr registers
// each in ruleErrors, so it comes back as itself on another node.
var (
	ErrRoomNotFound   = ruleErr(ErrNotFound, "room does not exist")
	ErrRoomExists     = ruleErr(ErrExists, "room already exists")
	ErrRoomClosed     = ruleErr(ErrPrecondition, "room is closed")
	ErrNotMember      = ruleErr(ErrPrecondition, "user is not a member of the room")
	ErrBanned         = ruleErr(ErrPrecondition, "user is banned from the room")
	ErrSeatTaken      = ruleErr(ErrPrecondition, "seat is taken")
	ErrSeatLocked     = ruleErr(ErrPrecondition, "seat is locked")
	ErrAlreadySeated  = ruleErr(ErrPrecondition, "user already holds another seat")
	ErrNotSeated      = ruleErr(ErrPrecondition, "user holds no seat")
	ErrReceiverAbsent = ruleErr(ErrPrecondition, "gift receiver is not a member of the room")
	ErrKickOwner      = ruleErr(ErrPrecondition, "the owner cannot be kicked")
	ErrAdminOwner     = ruleErr(ErrPrecondition, "the owner is not an admin and cannot be made one")
	ErrTooManyAdmins  = ruleErr(ErrPrecondition, fmt.Sprintf("the room already has %d admins", MaxAdmins))
	ErrNotOwner       = ruleErr(ErrPermission, "only the owner or an admin may do this")
	ErrOwnerOnly      = ruleErr(ErrPermission, "only the owner may do this")
	ErrKickAdmin      = ruleErr(ErrPermission, "only the owner may kick an admin")
)

// ruleErrors is every rule error, in declaration order.
var ruleErrors []error

func ruleErr(class error, text string) error {
	err := fmt.Errorf("%w: %s", class, text)
	ruleErrors = append(ruleErrors, err)
	return err
}

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

// ClassOf returns the class name of err ("internal" when it has none).
func ClassOf(err error) string { return errclass.Name(err) }

// ErrorFromClass rebuilds an error of the given class with the given text.
// A rule error comes back as its own sentinel, so errors.Is works the same
// whichever member ran the command.
func ErrorFromClass(class, msg string) error {
	for _, r := range ruleErrors {
		if r.Error() == msg && ClassOf(r) == class {
			return r
		}
	}
	if c := errclass.FromName(class); c != nil {
		return errclass.Define(c, msg)
	}
	return errors.New(msg)
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
