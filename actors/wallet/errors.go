package wallet

import (
	"fmt"

	"github.com/hyapp/roomcell/errclass"
)

// Error classes: the shared vocabulary (errclass) under the wallet's
// names. Every error the Service returns wraps exactly one of them; the
// gRPC layer maps them to status codes and the room grain branches on them
// with errors.Is.
var (
	// ErrInvalid: bad input (unknown gift or asset, sender == receiver,
	// non-positive amount). Retrying the same request cannot succeed.
	ErrInvalid = errclass.Invalid
	// ErrPrecondition: the request is well formed but the wallet's state
	// refuses it. Nothing was written.
	ErrPrecondition = errclass.Precondition
	// ErrConflict: the command_id was already used for a different
	// request. Nothing was written. Its class is Exists (the id is taken),
	// not Conflict: retrying cannot help.
	ErrConflict = errclass.Define(errclass.Exists, "command_id reused")
	// ErrUnavailable: the store could not be reached or timed out. The
	// change may or may not have committed; retry with the same
	// command_id to find out without charging twice.
	ErrUnavailable = errclass.Define(errclass.Unavailable, "wallet unavailable")
)

// Rule errors.
var (
	ErrInsufficientBalance = fmt.Errorf("%w: insufficient balance", ErrPrecondition)
	ErrVipDowngrade        = fmt.Errorf("%w: a lower VIP level cannot replace an active higher one", ErrPrecondition)
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
