package errclass

// Code is an error's stable number. It names one error across processes
// and versions: a room's answer relayed by another node and a remote
// wallet's status carry it, and the receiver finds the error by it, never
// by its text, so rewording an error breaks nothing. The table below is
// the only list of codes (as nats-server keeps one): a code is never
// renumbered or reused; a removed error's code stays retired.
type Code uint32

// The table: room rules 10xxx, the room grain 11xxx, the API's door
// (tokens, the HTTP gateway's limits) 12xxx, the wallet 20xxx.
const (
	CodeRoomNotFound   Code = 10001
	CodeRoomExists     Code = 10002
	CodeRoomClosed     Code = 10003
	CodeNotMember      Code = 10004
	CodeBanned         Code = 10005
	CodeSeatTaken      Code = 10006
	CodeSeatLocked     Code = 10007
	CodeAlreadySeated  Code = 10008
	CodeNotSeated      Code = 10009
	CodeReceiverAbsent Code = 10010
	CodeKickOwner      Code = 10011
	CodeAdminOwner     Code = 10012
	CodeTooManyAdmins  Code = 10013
	CodeNotOwner       Code = 10014
	CodeOwnerOnly      Code = 10015
	CodeKickAdmin      Code = 10016

	CodeApplyRequired       Code = 10017
	CodeSeatsFree           Code = 10018
	CodeAlreadyApplied      Code = 10019
	CodeAlreadyInvited      Code = 10020
	CodeNoSeatRequest       Code = 10021
	CodeTooManySeatRequests Code = 10022
	CodeTooManyMutes        Code = 10023
	CodeRateLimited         Code = 10024
	CodeRoomFull            Code = 10025
	// CodeTooManyBans: the room's ban list is at room.MaxBans bans in force.
	CodeTooManyBans Code = 10041
	// CodeOutranked: a ban or chat mute in force was imposed by the owner;
	// only the owner lifts, shortens or replaces it.
	CodeOutranked Code = 10042

	CodeGiftRefunded Code = 11001
	CodeRoomMoved    Code = 11002
	// CodeNoCoordinator: the node answering cannot reach its ownership
	// coordinator (etcd) and serves no room until it can.
	CodeNoCoordinator Code = 11003
	// CodeRoomStoreDown: the node found its room store unreachable and
	// refuses writes without trying it until a probe finds it back.
	CodeRoomStoreDown Code = 11004

	// The door: refusals before a request reaches a service.
	CodeUnauthenticated  Code = 12001
	CodeOperatorOnly     Code = 12002
	CodeRequestTooLarge  Code = 12003
	CodeMethodNotAllowed Code = 12004
	CodeNoRoute          Code = 12005
	CodeBadBody          Code = 12006
	CodeRequestTimeout   Code = 12007

	CodeCommandReused       Code = 20001
	CodeWalletUnavailable   Code = 20002
	CodeInsufficientBalance Code = 20003
	CodeVipDowngrade        Code = 20004
	CodeWalletGiftRefunded  Code = 20005
	CodeGiftNotReserved     Code = 20006
	CodeGiftSettled         Code = 20007
)

// codeNames are the codes' names, what a client reads in a status's
// google.rpc.ErrorInfo reason beside the number.
var codeNames = map[Code]string{
	CodeRoomNotFound:   "ROOM_NOT_FOUND",
	CodeRoomExists:     "ROOM_EXISTS",
	CodeRoomClosed:     "ROOM_CLOSED",
	CodeNotMember:      "NOT_MEMBER",
	CodeBanned:         "BANNED",
	CodeSeatTaken:      "SEAT_TAKEN",
	CodeSeatLocked:     "SEAT_LOCKED",
	CodeAlreadySeated:  "ALREADY_SEATED",
	CodeNotSeated:      "NOT_SEATED",
	CodeReceiverAbsent: "RECEIVER_ABSENT",
	CodeKickOwner:      "KICK_OWNER",
	CodeAdminOwner:     "ADMIN_OWNER",
	CodeTooManyAdmins:  "TOO_MANY_ADMINS",
	CodeNotOwner:       "NOT_OWNER",
	CodeOwnerOnly:      "OWNER_ONLY",
	CodeKickAdmin:      "KICK_ADMIN",

	CodeApplyRequired:       "APPLY_REQUIRED",
	CodeSeatsFree:           "SEATS_FREE",
	CodeAlreadyApplied:      "ALREADY_APPLIED",
	CodeAlreadyInvited:      "ALREADY_INVITED",
	CodeNoSeatRequest:       "NO_SEAT_REQUEST",
	CodeTooManySeatRequests: "TOO_MANY_SEAT_REQUESTS",
	CodeTooManyMutes:        "TOO_MANY_MUTES",
	CodeRateLimited:         "RATE_LIMITED",
	CodeRoomFull:            "ROOM_FULL",
	CodeTooManyBans:         "TOO_MANY_BANS",
	CodeOutranked:           "OUTRANKED",

	CodeGiftRefunded:  "GIFT_REFUNDED",
	CodeRoomMoved:     "ROOM_MOVED",
	CodeNoCoordinator: "NO_COORDINATOR",
	CodeRoomStoreDown: "ROOM_STORE_DOWN",

	CodeUnauthenticated:  "UNAUTHENTICATED",
	CodeOperatorOnly:     "OPERATOR_ONLY",
	CodeRequestTooLarge:  "REQUEST_TOO_LARGE",
	CodeMethodNotAllowed: "METHOD_NOT_ALLOWED",
	CodeNoRoute:          "NO_ROUTE",
	CodeBadBody:          "BAD_BODY",
	CodeRequestTimeout:   "REQUEST_TIMEOUT",

	CodeCommandReused:       "COMMAND_REUSED",
	CodeWalletUnavailable:   "WALLET_UNAVAILABLE",
	CodeInsufficientBalance: "INSUFFICIENT_BALANCE",
	CodeVipDowngrade:        "VIP_DOWNGRADE",
	CodeWalletGiftRefunded:  "WALLET_GIFT_REFUNDED",
	CodeGiftNotReserved:     "GIFT_NOT_RESERVED",
	CodeGiftSettled:         "GIFT_SETTLED",
}

// String is the code's name ("SEAT_TAKEN"); "" for a code not in the table.
func (c Code) String() string { return codeNames[c] }

// Codes lists every code of the table.
func Codes() []Code {
	out := make([]Code, 0, len(codeNames))
	for c := range codeNames {
		out = append(out, c)
	}
	return out
}
