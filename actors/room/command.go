package room

// Command types; also the command_type column of the command log.
const (
	CmdCreateRoom = "CreateRoom"
	CmdJoinRoom   = "JoinRoom"
	CmdLeaveRoom  = "LeaveRoom"
	CmdTakeMic    = "TakeMic"
	CmdReleaseMic = "ReleaseMic"
	CmdSendGift   = "SendGift"
	CmdKickUser   = "KickUser"
	CmdCloseRoom  = "CloseRoom"
	CmdHeartbeat  = "Heartbeat"
)

// Leave reasons.
const (
	ReasonLeft             = "left"
	ReasonKicked           = "kicked"
	ReasonReleased         = "released"
	ReasonHeartbeatTimeout = "heartbeat_timeout"
	ReasonSwitchedRoom     = "switched_room"
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

	Name     string   // CreateRoom
	MicSeats int      // CreateRoom; 0 = DefaultMicSeats
	Admins   []string // CreateRoom

	Seat int // TakeMic

	ToUserID  string // SendGift
	GiftID    string
	GiftCount int64
	HeatValue int64 // heat of the whole gift (price heat × count), from the wallet debit

	TargetUserID string // KickUser
	BanSeconds   int64
	Reason       string // LeaveRoom, KickUser, CloseRoom
}

// Mutates reports whether commands of this type are logged. Heartbeat only
// checks membership (presence lives in the directory) and is not logged.
func Mutates(cmdType string) bool { return cmdType != CmdHeartbeat }
