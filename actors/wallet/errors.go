package wallet

import (
	"errors"
	"fmt"
)

// Error classes. Every error the Service returns wraps exactly one of them;
// the gRPC layer maps them to status codes and the room grain branches on
// them with errors.Is.
var (
	// ErrInvalid: bad input (unknown gift or asset, sender == receiver,
	// non-positive amount). Retrying the same request cannot succeed.
	ErrInvalid = errors.New("invalid argument")
	// ErrPrecondition: the request is well formed but the wallet's state
	// refuses it. Nothing was written.
	ErrPrecondition = errors.New("failed precondition")
	// ErrConflict: the command_id was already used for a different
	// request. Nothing was written.
	ErrConflict = errors.New("command_id reused")
	// ErrUnavailable: the store could not be reached or timed out. The
	// change may or may not have committed; retry with the same
	// command_id to find out without charging twice.
	ErrUnavailable = errors.New("wallet unavailable")
)

// Rule errors.
var (
	ErrInsufficientBalance = fmt.Errorf("%w: insufficient balance", ErrPrecondition)
	ErrVipDowngrade        = fmt.Errorf("%w: a lower VIP level cannot replace an active higher one", ErrPrecondition)
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
