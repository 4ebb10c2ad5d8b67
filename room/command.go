package room

import (
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	v1 "github.com/hyapp/roomcell/api/roomcellv1"
)

// Command types; also the command_type column of the command log. A type
// is its request message's name without "Request" (CommandFromProto).
const (
	CmdCreateRoom  = "CreateRoom"
	CmdJoinRoom    = "JoinRoom"
	CmdLeaveRoom   = "LeaveRoom"
	CmdTakeMic     = "TakeMic"
	CmdReleaseMic  = "ReleaseMic"
	CmdSendGift    = "SendGift"
	CmdKickUser    = "KickUser"
	CmdCloseRoom   = "CloseRoom"
	CmdHeartbeat   = "Heartbeat"
	CmdSetAdmin    = "SetAdmin"
	CmdRemoveAdmin = "RemoveAdmin"
	CmdMuteSeat    = "MuteSeat"
	CmdUnmuteSeat  = "UnmuteSeat"
	CmdLockSeat    = "LockSeat"
	CmdUnlockSeat  = "UnlockSeat"
	CmdUpdateRoom  = "UpdateRoom"
	// CmdTransferOwner hands the room to another member.
	CmdTransferOwner = "TransferOwner"

	CmdSetSeatMode            = "SetSeatMode"
	CmdApplySeat              = "ApplySeat"
	CmdCancelSeatApplication  = "CancelSeatApplication"
	CmdApproveSeatApplication = "ApproveSeatApplication"
	CmdRejectSeatApplication  = "RejectSeatApplication"
	CmdInviteToSeat           = "InviteToSeat"
	CmdAcceptSeatInvitation   = "AcceptSeatInvitation"
	CmdDeclineSeatInvitation  = "DeclineSeatInvitation"

	CmdKickOffSeat  = "KickOffSeat"
	CmdMoveSeat     = "MoveSeat"
	CmdSetSeatCount = "SetSeatCount"

	CmdBanUser      = "BanUser"
	CmdUnbanUser    = "UnbanUser"
	CmdMuteMember   = "MuteMember"
	CmdUnmuteMember = "UnmuteMember"

	CmdReopenRoom = "ReopenRoom"
)

// Leave and seat-release reasons. The system ones are written by the room
// and its workers only; a client may not claim them (checkClientReason).
const (
	ReasonLeft             = "left"
	ReasonKicked           = "kicked"
	ReasonReleased         = "released"
	ReasonHeartbeatTimeout = "heartbeat_timeout"
	ReasonSwitchedRoom     = "switched_room"
	ReasonSeatLocked       = "seat_locked"
)

// Command is one request to a room, with the time it is decided at. The
// fields a command type does not use stay zero.
type Command struct {
	Type      string
	CommandID string
	RequestID string
	AppCode   string
	RoomID    string
	UserID    string // operator
	NowMs     int64
	// RequestHash fingerprints the request (RequestHash); it is stored
	// with the log record so a reused command_id can be checked.
	RequestHash string
	// TraceParent is the W3C trace context of the call that runs the
	// command, for its spans and its events' envelopes; never an input
	// of the rules ("" when not traced).
	TraceParent string

	Name         string   // CreateRoom; UpdateRoom, ReopenRoom ("" = unchanged)
	MicSeats     int      // CreateRoom (0 = DefaultMicSeats), SetSeatCount
	Admins       []string // CreateRoom
	Announcement *string  // UpdateRoom; nil = unchanged, "" = cleared

	Seat int // TakeMic, MuteSeat, UnmuteSeat, LockSeat, UnlockSeat, ApplySeat, InviteToSeat

	SeatMode       string // SetSeatMode
	TimeoutSeconds int64  // ApplySeat, InviteToSeat; 0 = DefaultSeatRequestSeconds

	ToUserID  string // SendGift
	GiftID    string
	GiftCount int64
	HeatValue int64  // heat of the whole gift (price heat × count), from the wallet debit
	GiftValue int64  // what the wallet charged for the whole gift (COIN), from the wallet debit
	Day       string // the ranking day of the gift (ranking.go), set by the grain

	TargetUserID string // KickUser, SetAdmin, RemoveAdmin, TransferOwner, Approve/RejectSeatApplication, InviteToSeat
	BanSeconds   int64  // KickUser, BanUser
	MovePolicy   string // MoveSeat: "" (abort), force, swap
	// Password: SetRoomPassword's new one, JoinRoom's offer, as the
	// client sent it. The grain replaces it before Decide (and before
	// anything is logged) with PasswordMAC (and, for SetRoomPassword,
	// PasswordSaltNew): see password.go.
	Password        string
	ClearPassword   bool              // SetRoomPassword
	PasswordMAC     string            // SetRoomPassword: the new verifier; JoinRoom: the offer's proof
	PasswordSaltNew string            // SetRoomPassword: the new salt
	AllMicsMuted    bool              // SetAllMicsMuted
	LikeCount       int64             // LikeRoom
	ChatDisabled    bool              // SetChatDisabled
	CustomSet       map[string]string // SetRoomCustomInfo
	CustomDelete    []string          // SetRoomCustomInfo
	// TargetUserIDs: BanUser's further targets (banTargets).
	TargetUserIDs []string
	MuteSeconds   int64  // MuteMember
	Reason        string // LeaveRoom, KickUser, CloseRoom

	Category   string   // CreateRoom, SetRoomMetadata
	Tags       []string // CreateRoom, SetRoomMetadata
	CoverURL   string   // CreateRoom, SetRoomMetadata
	Visibility string   // CreateRoom, SetRoomMetadata

	AudioKind   string // AudioPresence: enter, exit, start_audio, dismiss (audio.go)
	EventTimeMs int64  // AudioPresence: Tencent's event time
	SeatGraceMs int64  // AudioPresence: trtc.seat_grace, set by the sender
	// AudioPresence: exit/offline of the presence source: the member
	// leaves this long after the event (presence.stale_after), 0 never.
	LeaveAfterMs int64

	// MaxMembers caps the room for JoinRoom (0 = no cap): the node's
	// room.max_members, set by the grain, never by a client. A limit
	// changed later does not change what the log says was decided.
	MaxMembers int
}

// commandKind is everything the room knows about one command type. The
// common header (ids) is read and checked for every type alike; a row holds
// only what differs.
type commandKind struct {
	// fill copies the request's own fields into c.
	fill func(req proto.Message, c *Command)
	// check validates those fields without looking at the room.
	check func(c Command) error
	// client holds the rules only a client's command must pass (the
	// room's own workers send the same type through the internal path).
	client func(c Command) error
	// decide applies the room's rules once the room is known to exist and
	// be open (CreateRoom: before either).
	decide func(s State, c Command) ([]Event, error)
	// unlogged: not written to the command log, no command_id needed.
	unlogged bool
	// reopens: decided on a closed room too (every other command is
	// refused there with ErrRoomClosed).
	reopens bool
	// rate is the command's rate class (RateClassOf); "" is RateCommand.
	rate string
}

// Rate classes of commands: each is a bucket of rate_limits
// (internal/ratelimit), so a flood of cheap commands cannot spend the
// tokens of joins, gifts or moderation.
const (
	RateCreate     = "create"
	RateJoin       = "join"
	RateGift       = "gift"
	RateModeration = "moderation"
	RateCommand    = "command"
	// RateRead: the room's reads (queries), so a client polling a room
	// spends no command's token.
	RateRead = "read"
)

// queries are the requests of the grain protocol a room answers without
// deciding anything, by their rate class: the reads, and the join ticket
// (a step of a join, charged as a command).
var queries = map[string]string{
	"GetRoom": RateRead, "ListBans": RateRead, "ListContributors": RateRead,
	"GetJoinTicket": RateCommand,
}

// RateClassOf returns the rate class of a command type or query,
// RateCommand for a row that names none (or a type that is neither).
func RateClassOf(cmdType string) string {
	if r := commands[cmdType].rate; r != "" {
		return r
	}
	if r, ok := queries[cmdType]; ok {
		return r
	}
	return RateCommand
}

// commands is the command table: one row per command type.
var commands = map[string]commandKind{
	CmdCreateRoom: {
		rate: RateCreate,
		fill: fill(func(r *v1.CreateRoomRequest, c *Command) {
			c.Name, c.MicSeats, c.Admins = r.Name, int(r.MicSeats), r.AdminUserIds
			c.Category, c.Tags, c.CoverURL, c.Visibility = r.Category, r.Tags, r.CoverUrl, r.Visibility
		}),
		check: checkCreate, decide: decideCreate,
	},
	CmdJoinRoom: {
		rate:  RateJoin,
		fill:  fill(func(r *v1.JoinRoomRequest, c *Command) { c.Password = r.Password }),
		check: checkJoinPassword, decide: decideJoin,
	},
	CmdLeaveRoom: {
		rate:  RateJoin,
		fill:  fill(func(r *v1.LeaveRoomRequest, c *Command) { c.Reason = r.Reason }),
		check: checkReason, client: checkClientReason, decide: decideLeave,
	},
	CmdTakeMic:    {fill: fillSeat[*v1.TakeMicRequest], check: checkSeat, decide: decideTakeMic},
	CmdReleaseMic: {decide: decideReleaseMic},
	CmdSendGift: {
		rate: RateGift,
		fill: fill(func(r *v1.SendGiftRequest, c *Command) {
			c.ToUserID, c.GiftID, c.GiftCount = r.ToUserId, r.GiftId, r.GiftCount
		}),
		check: checkGift, decide: decideGift,
	},
	CmdKickUser: {
		rate: RateModeration,
		fill: fill(func(r *v1.KickUserRequest, c *Command) {
			c.TargetUserID, c.BanSeconds, c.Reason = r.TargetUserId, r.BanSeconds, r.Reason
		}),
		check: checkKick, decide: decideKick,
	},
	CmdCloseRoom: {
		rate:  RateModeration,
		fill:  fill(func(r *v1.CloseRoomRequest, c *Command) { c.Reason = r.Reason }),
		check: checkReason, decide: decideClose,
	},
	CmdHeartbeat:   {decide: decideHeartbeat, unlogged: true},
	CmdSetAdmin:    {rate: RateModeration, fill: fillTarget[*v1.SetAdminRequest], check: checkTarget, decide: decideSetAdmin},
	CmdRemoveAdmin: {rate: RateModeration, fill: fillTarget[*v1.RemoveAdminRequest], check: checkTarget, decide: decideRemoveAdmin},
	CmdMuteSeat:    {fill: fillSeat[*v1.MuteSeatRequest], check: checkSeat, decide: decideMuteSeat},
	CmdUnmuteSeat:  {fill: fillSeat[*v1.UnmuteSeatRequest], check: checkSeat, decide: decideUnmuteSeat},
	CmdLockSeat:    {fill: fillSeat[*v1.LockSeatRequest], check: checkSeat, decide: decideLockSeat},
	CmdUnlockSeat:  {fill: fillSeat[*v1.UnlockSeatRequest], check: checkSeat, decide: decideUnlockSeat},
	CmdUpdateRoom: {
		fill: fill(func(r *v1.UpdateRoomRequest, c *Command) {
			c.Name, c.Announcement = r.Name, r.Announcement
		}),
		check: checkUpdate, decide: decideUpdate,
	},
	CmdTransferOwner: {rate: RateModeration, fill: fillTarget[*v1.TransferOwnerRequest], check: checkTransfer, decide: decideTransferOwner},
	// Seat applications and invitations (seatrequest.go).
	CmdSetSeatMode: {
		fill:  fill(func(r *v1.SetSeatModeRequest, c *Command) { c.SeatMode = r.SeatMode }),
		check: checkSeatMode, decide: decideSetSeatMode,
	},
	CmdApplySeat: {
		fill: fill(func(r *v1.ApplySeatRequest, c *Command) {
			c.Seat, c.TimeoutSeconds = int(r.Seat), r.TimeoutSeconds
		}),
		check: checkApply, decide: decideApplySeat,
	},
	CmdCancelSeatApplication:  {decide: decideCancelSeatApplication},
	CmdApproveSeatApplication: {fill: fillTarget[*v1.ApproveSeatApplicationRequest], check: checkTarget, decide: decideApproveSeatApplication},
	CmdRejectSeatApplication:  {fill: fillTarget[*v1.RejectSeatApplicationRequest], check: checkTarget, decide: decideRejectSeatApplication},
	CmdInviteToSeat: {
		fill: fill(func(r *v1.InviteToSeatRequest, c *Command) {
			c.TargetUserID, c.Seat, c.TimeoutSeconds = r.TargetUserId, int(r.Seat), r.TimeoutSeconds
		}),
		check: checkInvite, decide: decideInviteToSeat,
	},
	CmdAcceptSeatInvitation:  {decide: decideAcceptSeatInvitation},
	CmdDeclineSeatInvitation: {decide: decideDeclineSeatInvitation},
	// The room's own: no request message maps to it (CommandFromProto).
	CmdExpireSeatRequests: {decide: decideExpireSeatRequests},
	// Seat moves (seatmove.go).
	CmdKickOffSeat: {rate: RateModeration, fill: fillTarget[*v1.KickOffSeatRequest], check: checkTarget, decide: decideKickOffSeat},
	CmdMoveSeat: {
		fill: fill(func(r *v1.MoveSeatRequest, c *Command) {
			c.Seat, c.TargetUserID, c.MovePolicy = int(r.Seat), r.TargetUserId, r.Policy
		}),
		check: checkMove, decide: decideMoveSeat,
	},
	CmdSetSeatCount: {
		fill:  fill(func(r *v1.SetSeatCountRequest, c *Command) { c.MicSeats = int(r.MicSeats) }),
		check: checkSeatCount, decide: decideSetSeatCount,
	},
	// Moderation without a kick (moderation.go).
	CmdBanUser: {
		rate: RateModeration,
		fill: fill(func(r *v1.BanUserRequest, c *Command) {
			c.TargetUserID, c.BanSeconds, c.Reason, c.TargetUserIDs = r.TargetUserId, r.BanSeconds, r.Reason, r.TargetUserIds
		}),
		check: checkBan, decide: decideBan,
	},
	CmdUnbanUser: {rate: RateModeration, fill: fillTarget[*v1.UnbanUserRequest], check: checkTarget, decide: decideUnban},
	CmdMuteMember: {
		rate: RateModeration,
		fill: fill(func(r *v1.MuteMemberRequest, c *Command) {
			c.TargetUserID, c.MuteSeconds = r.TargetUserId, r.MuteSeconds
		}),
		check: checkMute, decide: decideMuteMember,
	},
	CmdUnmuteMember: {rate: RateModeration, fill: fillTarget[*v1.UnmuteMemberRequest], check: checkTarget, decide: decideUnmuteMember},
	// Lifecycles (lifecycle.go).
	CmdReopenRoom: {
		rate:  RateCreate,
		fill:  fill(func(r *v1.ReopenRoomRequest, c *Command) { c.Name = r.Name }),
		check: checkReopen, decide: decideReopen, reopens: true,
	},
	// Tencent's audio side reports (audio.go): the room's own.
	CmdAudioPresence: {
		fill: fill(func(r *v1.AudioPresenceRequest, c *Command) {
			c.AudioKind, c.EventTimeMs, c.Reason, c.SeatGraceMs, c.LeaveAfterMs = r.Kind, r.EventTimeMs, r.Reason, r.SeatGraceMs, r.LeaveAfterMs
		}),
		check: checkAudio, client: refuseClient, decide: decideAudio,
	},
	// Metadata (roommeta.go).
	CmdSetRoomMetadata: {
		fill: fill(func(r *v1.SetRoomMetadataRequest, c *Command) {
			c.Category, c.Tags, c.CoverURL, c.Visibility = r.Category, r.Tags, r.CoverUrl, r.Visibility
		}),
		check: checkMeta, decide: decideSetMeta,
	},
	// The all-mics switch (allmics.go).
	CmdSetAllMicsMuted: {
		fill:   fill(func(r *v1.SetAllMicsMutedRequest, c *Command) { c.AllMicsMuted = r.Muted }),
		decide: decideSetAllMicsMuted,
	},
	// The chat-disabled switch (chatdisabled.go): moderation, as a mute.
	CmdSetChatDisabled: {
		rate:   RateModeration,
		fill:   fill(func(r *v1.SetChatDisabledRequest, c *Command) { c.ChatDisabled = r.Disabled }),
		decide: decideSetChatDisabled,
	},
	// Likes (likes.go): gathered by the grain into one row per window.
	CmdLikeRoom: {
		fill:  fill(func(r *v1.LikeRoomRequest, c *Command) { c.LikeCount = r.Count }),
		check: checkLike, decide: decideLikeRoom,
	},
	// Password (password.go).
	CmdSetRoomPassword: {
		fill: fill(func(r *v1.SetRoomPasswordRequest, c *Command) {
			c.Password, c.ClearPassword = r.Password, r.Clear
		}),
		check: checkPassword, decide: decideSetPassword,
	},
	// Custom info (custominfo.go).
	CmdSetRoomCustomInfo: {
		fill: fill(func(r *v1.SetRoomCustomInfoRequest, c *Command) {
			c.CustomSet, c.CustomDelete = r.Set, r.DeleteKeys
		}),
		check: checkCustomInfo, decide: decideSetCustomInfo,
	},
}

// Mutates reports whether commands of this type are logged. Heartbeat only
// checks membership (presence lives in the directory) and is not logged.
func Mutates(cmdType string) bool { return !commands[cmdType].unlogged }

// CommandTypes lists the command types a room decides, sorted.
func CommandTypes() []string { return slices.Sorted(maps.Keys(commands)) }

func fill[R proto.Message](f func(r R, c *Command)) func(proto.Message, *Command) {
	return func(m proto.Message, c *Command) { f(m.(R), c) }
}

func fillSeat[R interface {
	proto.Message
	GetSeat() int32
}](m proto.Message, c *Command) {
	c.Seat = int(m.(R).GetSeat())
}

func fillTarget[R interface {
	proto.Message
	GetTargetUserId() string
}](m proto.Message, c *Command) {
	c.TargetUserID = m.(R).GetTargetUserId()
}
