package room

import "github.com/hyapp/roomcell/errclass"

// Rule errors: one per broken rule, each in one class of the shared
// vocabulary (errclass) with its code from the one code table, so it comes
// back as itself on another node (errclass.FromWire finds it by code).
// Input errors are errclass.Invalid with the field named (errclass.Invalidf).
var (
	ErrRoomNotFound   = ruleErr(errclass.CodeRoomNotFound)
	ErrRoomExists     = ruleErr(errclass.CodeRoomExists)
	ErrRoomClosed     = ruleErr(errclass.CodeRoomClosed)
	ErrNotMember      = ruleErr(errclass.CodeNotMember)
	ErrBanned         = ruleErr(errclass.CodeBanned)
	ErrSeatTaken      = ruleErr(errclass.CodeSeatTaken)
	ErrSeatLocked     = ruleErr(errclass.CodeSeatLocked)
	ErrAlreadySeated  = ruleErr(errclass.CodeAlreadySeated)
	ErrNotSeated      = ruleErr(errclass.CodeNotSeated)
	ErrReceiverAbsent = ruleErr(errclass.CodeReceiverAbsent)
	ErrKickOwner      = ruleErr(errclass.CodeKickOwner)
	ErrAdminOwner     = ruleErr(errclass.CodeAdminOwner)
	ErrTooManyAdmins  = ruleErr(errclass.CodeTooManyAdmins, MaxAdmins)
	ErrNotOwner       = ruleErr(errclass.CodeNotOwner)
	ErrOwnerOnly      = ruleErr(errclass.CodeOwnerOnly)
	ErrKickAdmin      = ruleErr(errclass.CodeKickAdmin)

	ErrApplyRequired       = ruleErr(errclass.CodeApplyRequired)
	ErrSeatsFree           = ruleErr(errclass.CodeSeatsFree)
	ErrAlreadyApplied      = ruleErr(errclass.CodeAlreadyApplied)
	ErrAlreadyInvited      = ruleErr(errclass.CodeAlreadyInvited)
	ErrNoSeatRequest       = ruleErr(errclass.CodeNoSeatRequest)
	ErrTooManyMutes        = ruleErr(errclass.CodeTooManyMutes, MaxMutes)
	ErrTooManySeatRequests = ruleErr(errclass.CodeTooManySeatRequests, MaxSeatRequests)
	ErrRoomFull            = ruleErr(errclass.CodeRoomFull)
	ErrTooManyBans         = ruleErr(errclass.CodeTooManyBans, MaxBans)
	ErrOutranked           = ruleErr(errclass.CodeOutranked)
)

// ErrGiftRefunded is the grain's answer (not a rule of Decide) for a gift
// whose room write failed for good: its charge is (or is being) returned,
// and its command_id keeps this answer.
var ErrGiftRefunded = errclass.New(errclass.CodeGiftRefunded)

// ErrRateLimited is the gRPC layer's answer (not a rule of Decide) for a
// command over its user's or app's rate (internal/ratelimit); the status
// says when to retry.
var ErrRateLimited = errclass.New(errclass.CodeRateLimited)

// ruleErrors is every rule error, in declaration order: the tests check
// that a rule decides each.
var ruleErrors []error

func ruleErr(code errclass.Code, args ...any) error {
	err := errclass.New(code, args...)
	ruleErrors = append(ruleErrors, err)
	return err
}
