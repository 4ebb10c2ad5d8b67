package room

import (
	"fmt"

	"github.com/hyapp/roomcell/errclass"
)

// Rule errors: one per broken rule, each in one class of the shared
// vocabulary (errclass) with its code from the one code table, so it comes
// back as itself on another node (errclass.FromWire finds it by code).
// Input errors are errclass.Invalid with the field named (errclass.Invalidf).
var (
	ErrRoomNotFound   = ruleErr(errclass.CodeRoomNotFound, errclass.NotFound, "room does not exist")
	ErrRoomExists     = ruleErr(errclass.CodeRoomExists, errclass.Exists, "room already exists")
	ErrRoomClosed     = ruleErr(errclass.CodeRoomClosed, errclass.Precondition, "room is closed")
	ErrNotMember      = ruleErr(errclass.CodeNotMember, errclass.Precondition, "user is not a member of the room")
	ErrBanned         = ruleErr(errclass.CodeBanned, errclass.Precondition, "user is banned from the room")
	ErrSeatTaken      = ruleErr(errclass.CodeSeatTaken, errclass.Precondition, "seat is taken")
	ErrSeatLocked     = ruleErr(errclass.CodeSeatLocked, errclass.Precondition, "seat is locked")
	ErrAlreadySeated  = ruleErr(errclass.CodeAlreadySeated, errclass.Precondition, "user already holds another seat")
	ErrNotSeated      = ruleErr(errclass.CodeNotSeated, errclass.Precondition, "user holds no seat")
	ErrReceiverAbsent = ruleErr(errclass.CodeReceiverAbsent, errclass.Precondition, "gift receiver is not a member of the room")
	ErrKickOwner      = ruleErr(errclass.CodeKickOwner, errclass.Precondition, "the owner cannot be kicked")
	ErrAdminOwner     = ruleErr(errclass.CodeAdminOwner, errclass.Precondition, "the owner is not an admin and cannot be made one")
	ErrTooManyAdmins  = ruleErr(errclass.CodeTooManyAdmins, errclass.Precondition, fmt.Sprintf("the room already has %d admins", MaxAdmins))
	ErrNotOwner       = ruleErr(errclass.CodeNotOwner, errclass.Permission, "only the owner or an admin may do this")
	ErrOwnerOnly      = ruleErr(errclass.CodeOwnerOnly, errclass.Permission, "only the owner may do this")
	ErrKickAdmin      = ruleErr(errclass.CodeKickAdmin, errclass.Permission, "only the owner may kick an admin")

	ErrApplyRequired       = ruleErr(errclass.CodeApplyRequired, errclass.Precondition, "seats are taken by application in this room: apply for the seat")
	ErrSeatsFree           = ruleErr(errclass.CodeSeatsFree, errclass.Precondition, "seats are free to take in this room: take the seat")
	ErrAlreadyApplied      = ruleErr(errclass.CodeAlreadyApplied, errclass.Precondition, "user has a pending application for another seat")
	ErrAlreadyInvited      = ruleErr(errclass.CodeAlreadyInvited, errclass.Precondition, "user has a pending invitation to another seat")
	ErrNoSeatRequest       = ruleErr(errclass.CodeNoSeatRequest, errclass.Precondition, "no pending seat request (none was made, or it ended or expired)")
	ErrTooManyMutes        = ruleErr(errclass.CodeTooManyMutes, errclass.Precondition, fmt.Sprintf("the room already has %d muted members", MaxMutes))
	ErrTooManySeatRequests = ruleErr(errclass.CodeTooManySeatRequests, errclass.Precondition, fmt.Sprintf("the room already has %d pending seat requests of this kind", MaxSeatRequests))
	ErrTooManyBans         = ruleErr(errclass.CodeTooManyBans, errclass.Precondition, fmt.Sprintf("the room already has %d bans in force", MaxBans))
	ErrOutranked           = ruleErr(errclass.CodeOutranked, errclass.Permission, "the owner imposed this ban or mute: only the owner may lift or change it")
	ErrRoomFull            = ruleErr(errclass.CodeRoomFull, errclass.Exhausted, "the room is full (room.max_members)")
)

// ErrGiftRefunded is the grain's answer (not a rule of Decide) for a gift
// whose room write failed for good: its charge is (or is being) returned,
// and its command_id keeps this answer.
var ErrGiftRefunded = errclass.New(errclass.CodeGiftRefunded, errclass.Precondition, "gift was not delivered and its charge is returned to the sender; send it again under a new command_id")

// ErrRateLimited is the gRPC layer's answer (not a rule of Decide) for a
// command over its user's or app's rate (internal/ratelimit); the status
// says when to retry.
var ErrRateLimited = errclass.New(errclass.CodeRateLimited, errclass.Exhausted, "rate limit exceeded; retry after the delay in the status's RetryInfo")

// ruleErrors is every rule error, in declaration order: the tests check
// that a rule decides each.
var ruleErrors []error

func ruleErr(code errclass.Code, class error, text string) error {
	err := errclass.New(code, class, text)
	ruleErrors = append(ruleErrors, err)
	return err
}
