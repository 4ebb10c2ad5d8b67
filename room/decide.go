package room

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hyapp/roomcell/errclass"
)

// Decide checks cmd against the room's rules and returns the events it
// produces. It does not change s. A nil error with no events is a valid
// no-op (joining a room one is in, taking the seat one holds).
// The rules, one per row, are the table in decide_test.go; the command
// types and their checks are the table in command.go.
func Decide(s State, cmd Command) ([]Event, error) {
	k, err := validate(cmd)
	if err != nil {
		return nil, err
	}
	if cmd.Type != CmdCreateRoom {
		if !s.Exists {
			return nil, ErrRoomNotFound
		}
		if s.Status == StatusClosed && !k.reopens {
			return nil, ErrRoomClosed
		}
	}
	return k.decide(s, cmd)
}

// validate checks the fields of cmd that do not depend on room state: the
// header every command carries, then the type's own fields.
func validate(cmd Command) (commandKind, error) {
	k, ok := commands[cmd.Type]
	if !ok {
		return commandKind{}, errclass.Invalidf("unknown command type %q", cmd.Type)
	}
	if err := checkID("app_code", cmd.AppCode); err != nil {
		return k, err
	}
	if err := checkID("room_id", cmd.RoomID); err != nil {
		return k, err
	}
	if err := checkID("user_id", cmd.UserID); err != nil {
		return k, err
	}
	// An unlogged command needs no command_id (there is nothing to
	// deduplicate), but one that is given must still be a valid id.
	if !k.unlogged || cmd.CommandID != "" {
		if err := checkID("command_id", cmd.CommandID); err != nil {
			return k, err
		}
	}
	if cmd.RequestID != "" {
		if err := checkID("request_id", cmd.RequestID); err != nil {
			return k, err
		}
	}
	if k.check != nil {
		if err := k.check(cmd); err != nil {
			return k, err
		}
	}
	return k, nil
}

// checkOperator allows the owner always, even from outside the room (an
// owner manages their room from the room list too), and a listed admin only
// while they are in the room: an admin the owner kicked and banned must not
// keep kicking people or close the room from outside.
func checkOperator(s State, user string) error {
	if user == s.Owner {
		return nil
	}
	if !s.IsAdmin(user) {
		return ErrNotOwner
	}
	if !s.IsMember(user) {
		return ErrNotMember
	}
	return nil
}

func checkCreate(cmd Command) error {
	if err := checkName("name", cmd.Name); err != nil {
		return err
	}
	if cmd.MicSeats < 0 || cmd.MicSeats > MaxMicSeats {
		return errclass.Invalidf("mic_seats must be between 0 (default %d) and %d, got %d", DefaultMicSeats, MaxMicSeats, cmd.MicSeats)
	}
	if len(cmd.Admins) > MaxAdmins {
		return errclass.Invalidf("at most %d admin_user_ids, got %d", MaxAdmins, len(cmd.Admins))
	}
	for i, a := range cmd.Admins {
		if err := checkID(fmt.Sprintf("admin_user_ids[%d]", i), a); err != nil {
			return err
		}
	}
	return checkMeta(cmd)
}

func decideCreate(s State, cmd Command) ([]Event, error) {
	if s.Exists {
		return nil, ErrRoomExists
	}
	seats := cmd.MicSeats
	if seats == 0 {
		seats = DefaultMicSeats
	}
	// Admins are kept sorted and unique so the event, the state and the
	// RoomView are canonical; the owner is never listed (owner outranks
	// admin, see decideKick).
	admins := slices.DeleteFunc(slices.Clone(cmd.Admins), func(a string) bool { return a == cmd.UserID })
	slices.Sort(admins)
	admins = slices.Compact(admins)
	if len(admins) == 0 {
		admins = nil
	}
	return []Event{
		RoomCreated{OwnerUserID: cmd.UserID, Name: cmd.Name, MicSeats: seats, AdminUserIDs: admins, CreatedAtMs: cmd.NowMs, Meta: metaOf(cmd)},
		RoomUserJoined{UserID: cmd.UserID, JoinedAtMs: cmd.NowMs},
	}, nil
}

func decideJoin(s State, cmd Command) ([]Event, error) {
	if s.IsMember(cmd.UserID) {
		return nil, nil
	}
	if s.BannedAt(cmd.UserID, cmd.NowMs) {
		return nil, ErrBanned
	}
	if err := passwordRefused(s, cmd); err != nil {
		return nil, err
	}
	// The owner always gets into their own room, full or not.
	if cmd.MaxMembers > 0 && len(s.Members) >= cmd.MaxMembers && cmd.UserID != s.Owner {
		return nil, ErrRoomFull
	}
	return []Event{RoomUserJoined{UserID: cmd.UserID, JoinedAtMs: cmd.NowMs}}, nil
}

func checkReason(cmd Command) error { return checkText("reason", cmd.Reason, MaxReasonLen) }

// systemReasons are written by the room itself (kick, seat lock) or by its
// workers through the internal path (presence: heartbeat_timeout;
// directory: switched_room). A client claiming one would make its own
// leave look like a timeout or a kick to every IM client.
var systemReasons = []string{ReasonHeartbeatTimeout, ReasonSwitchedRoom, ReasonKicked, ReasonSeatLocked,
	ReasonKickedOffSeat, ReasonMoved, ReasonSeatRemoved, ReasonAudioLeft, ReasonDisplaced, ReasonSwapped}

// Command ids the room and its workers derive for the commands they send
// themselves. They are reserved: a client that spent one first (the ids
// are derived from facts a client sees: a heartbeat's time, a join, a seq)
// would have the worker's command refused as "a different command under
// the same id" for ever, e.g. a quiet member never taken out.
const (
	DirectoryIDPrefix        = "dir-"         // switched_room leaves (directory worker)
	RankIDPrefix             = "rank-"        // RoomRankChanged (the room itself)
	HeartbeatTimeoutIDPrefix = "hb-timeout-"  // heartbeat_timeout leaves (presence worker)
	SeatExpireIDPrefix       = "seat-expire-" // ExpireSeatRequests (the room itself)
)

var systemIDPrefixes = []string{DirectoryIDPrefix, RankIDPrefix, HeartbeatTimeoutIDPrefix, SeatExpireIDPrefix, AudioIDPrefix, LikesIDPrefix}

// SystemIDPrefix returns the reserved prefix id starts with, if any: the
// room's own commands carry one, a client's never does.
func SystemIDPrefix(id string) (string, bool) {
	for _, p := range systemIDPrefixes {
		if strings.HasPrefix(id, p) {
			return p, true
		}
	}
	return "", false
}

func checkClientCommandID(cmd Command) error {
	if p, ok := SystemIDPrefix(cmd.CommandID); ok {
		return errclass.Invalidf("command_id prefix %q is reserved for the room's own commands", p)
	}
	return nil
}

func checkClientReason(cmd Command) error {
	if slices.Contains(systemReasons, cmd.Reason) {
		return errclass.Invalidf("reason %q is reserved for the room's own use", cmd.Reason)
	}
	return nil
}

// decideLeave lets anyone leave, the owner included: the room stays open
// without them (a voice room outlives its host stepping out) and they keep
// the owner's rights and may come back. A seat is released first, as its own
// event, so IM clients see the seat free before the user is gone.
func decideLeave(s State, cmd Command) ([]Event, error) {
	if !s.IsMember(cmd.UserID) {
		return nil, ErrNotMember
	}
	reason := cmd.Reason
	if reason == "" {
		reason = ReasonLeft
	}
	return leaveEvents(s, cmd.UserID, reason), nil
}

// leaveEvents are a member's leave for reason: the seat, the seat
// requests, the leave.
func leaveEvents(s State, user, reason string) []Event {
	var evs []Event
	if seat := s.SeatOf(user); seat >= 0 {
		evs = append(evs, RoomMicReleased{UserID: user, Seat: seat, Reason: reason})
	}
	evs = append(evs, endRequests(s, user, OutcomeLeft, false, false)...)
	return append(evs, RoomUserLeft{UserID: user, Reason: reason})
}

// checkSeat bounds a seat index by the largest room; the room's own seat
// count is state (seatInRoom).
func checkSeat(cmd Command) error {
	if cmd.Seat < 0 || cmd.Seat >= MaxMicSeats {
		return errclass.Invalidf("seat must be between 0 and %d, got %d", MaxMicSeats-1, cmd.Seat)
	}
	return nil
}

func seatInRoom(s State, seat int) error {
	if seat >= len(s.Seats) {
		return errclass.Invalidf("seat %d out of range: room has %d seats", seat, len(s.Seats))
	}
	return nil
}

func decideTakeMic(s State, cmd Command) ([]Event, error) {
	if !s.IsMember(cmd.UserID) {
		return nil, ErrNotMember
	}
	if err := seatInRoom(s, cmd.Seat); err != nil {
		return nil, err
	}
	switch holder := s.Seats[cmd.Seat]; holder {
	case cmd.UserID:
		return nil, nil
	case "":
	default:
		return nil, ErrSeatTaken
	}
	// Nobody takes a locked seat, the owner included: unlocking is one
	// command away for them, and a lock that has exceptions is not one.
	if s.SeatLocked(cmd.Seat) {
		return nil, ErrSeatLocked
	}
	if s.SeatOf(cmd.UserID) >= 0 {
		return nil, ErrAlreadySeated
	}
	// In apply mode only operators seat themselves; the rest apply.
	if s.seatMode() == SeatModeApply && checkOperator(s, cmd.UserID) != nil {
		return nil, ErrApplyRequired
	}
	return seatedEvents(s, cmd.UserID, cmd.Seat, false, false), nil
}

func decideReleaseMic(s State, cmd Command) ([]Event, error) {
	if !s.IsMember(cmd.UserID) {
		return nil, ErrNotMember
	}
	seat := s.SeatOf(cmd.UserID)
	if seat < 0 {
		return nil, ErrNotSeated
	}
	return []Event{RoomMicReleased{UserID: cmd.UserID, Seat: seat, Reason: ReasonReleased}}, nil
}

func checkGift(cmd Command) error {
	if err := checkID("to_user_id", cmd.ToUserID); err != nil {
		return err
	}
	if err := checkID("gift_id", cmd.GiftID); err != nil {
		return err
	}
	if cmd.GiftCount <= 0 || cmd.GiftCount > MaxGiftCount {
		return errclass.Invalidf("gift_count must be between 1 and %d, got %d", MaxGiftCount, cmd.GiftCount)
	}
	if cmd.HeatValue < 0 {
		return errclass.Invalidf("heat value must not be negative")
	}
	return checkGiftRanking(cmd)
}

func decideGift(s State, cmd Command) ([]Event, error) {
	if !s.IsMember(cmd.UserID) {
		return nil, ErrNotMember
	}
	if !s.IsMember(cmd.ToUserID) {
		return nil, ErrReceiverAbsent
	}
	evs := []Event{RoomGiftSent{FromUserID: cmd.UserID, ToUserID: cmd.ToUserID, GiftID: cmd.GiftID, GiftCount: cmd.GiftCount, HeatValue: cmd.HeatValue,
		Value: cmd.GiftValue, Day: cmd.Day}}
	// Heat saturates instead of wrapping negative; Delta is what was
	// actually added, so heat always equals the sum of the deltas.
	delta := min(cmd.HeatValue, math.MaxInt64-s.Heat)
	if delta > 0 {
		evs = append(evs, RoomHeatChanged{Delta: delta, Heat: s.Heat + delta})
	}
	return append(evs, topChange(s, cmd.UserID, cmd.GiftValue, cmd.Day)...), nil
}

func checkKick(cmd Command) error {
	if err := checkTarget(cmd); err != nil {
		return err
	}
	if cmd.TargetUserID == cmd.UserID {
		return errclass.Invalidf("target_user_id must differ from user_id")
	}
	if cmd.BanSeconds < 0 || cmd.BanSeconds > MaxBanSeconds {
		return errclass.Invalidf("ban_seconds must be between 0 and %d, got %d", MaxBanSeconds, cmd.BanSeconds)
	}
	return checkReason(cmd)
}

// decideKick: the owner kicks anyone but themself; an admin in the room
// kicks ordinary members but neither the owner nor another admin (only the
// owner outranks an admin). A kicked admin is an admin no more
// (adminLoss); a kick with a ban needs a place for the ban (roomForBans).
func decideKick(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if cmd.TargetUserID == s.Owner {
		return nil, ErrKickOwner
	}
	if cmd.UserID != s.Owner && s.IsAdmin(cmd.TargetUserID) {
		return nil, ErrKickAdmin
	}
	if !s.IsMember(cmd.TargetUserID) {
		return nil, ErrNotMember
	}
	if cmd.BanSeconds > 0 {
		if err := roomForBans(s, []string{cmd.TargetUserID}, cmd.NowMs); err != nil {
			return nil, err
		}
	}
	var evs []Event
	if seat := s.SeatOf(cmd.TargetUserID); seat >= 0 {
		evs = append(evs, RoomMicReleased{UserID: cmd.TargetUserID, Seat: seat, Reason: ReasonKicked})
	}
	evs = append(evs, endRequests(s, cmd.TargetUserID, OutcomeLeft, false, false)...)
	evs = append(evs, adminLoss(s, cmd)...)
	var until int64
	if cmd.BanSeconds > 0 {
		until = cmd.NowMs + cmd.BanSeconds*1000
	}
	return append(evs, RoomUserKicked{TargetUserID: cmd.TargetUserID, OperatorUserID: cmd.UserID, Reason: cmd.Reason, BanUntilMs: until}), nil
}

func decideClose(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	// Every pending seat request ends with its own event, so each one
	// ends exactly once in the log, whatever closes the room.
	return append(endAllRequests(s, OutcomeClosed), RoomClosed{OperatorUserID: cmd.UserID, Reason: cmd.Reason}), nil
}

// decideHeartbeat: presence (last seen) lives in the directory, not in
// room state: a heartbeat only tells the caller whether it is still in the
// room, so a client that was kicked or timed out learns it and rejoins. It
// produces no events and is not logged.
func decideHeartbeat(s State, cmd Command) ([]Event, error) {
	if !s.IsMember(cmd.UserID) {
		return nil, ErrNotMember
	}
	return nil, nil
}

func checkTarget(cmd Command) error { return checkID("target_user_id", cmd.TargetUserID) }

// decideSetAdmin: only the owner appoints admins, from inside the room or
// not, and may appoint a user who is not in the room now (as CreateRoom's
// admin list does).
func decideSetAdmin(s State, cmd Command) ([]Event, error) {
	if cmd.UserID != s.Owner {
		return nil, ErrOwnerOnly
	}
	if cmd.TargetUserID == s.Owner {
		return nil, ErrAdminOwner
	}
	if s.IsAdmin(cmd.TargetUserID) {
		return nil, nil
	}
	if len(s.Admins) >= MaxAdmins {
		return nil, ErrTooManyAdmins
	}
	return []Event{RoomAdminSet{TargetUserID: cmd.TargetUserID, OperatorUserID: cmd.UserID}}, nil
}

func decideRemoveAdmin(s State, cmd Command) ([]Event, error) {
	if cmd.UserID != s.Owner {
		return nil, ErrOwnerOnly
	}
	if cmd.TargetUserID == s.Owner {
		return nil, ErrAdminOwner
	}
	if !s.IsAdmin(cmd.TargetUserID) {
		return nil, nil
	}
	return []Event{RoomAdminRemoved{TargetUserID: cmd.TargetUserID, OperatorUserID: cmd.UserID}}, nil
}

func checkTransfer(cmd Command) error {
	if err := checkTarget(cmd); err != nil {
		return err
	}
	if cmd.TargetUserID == cmd.UserID {
		return errclass.Invalidf("target_user_id must differ from user_id")
	}
	return nil
}

// decideTransferOwner: only the owner hands the room on, and only to a
// member, so the room never belongs to someone who never came in (a banned
// user cannot be in the room). The new owner leaves the admin list: the
// owner outranks admins and is never listed as one.
func decideTransferOwner(s State, cmd Command) ([]Event, error) {
	if cmd.UserID != s.Owner {
		return nil, ErrOwnerOnly
	}
	if !s.IsMember(cmd.TargetUserID) {
		return nil, ErrNotMember
	}
	return []Event{RoomOwnerChanged{OwnerUserID: cmd.TargetUserID, PreviousOwnerUserID: s.Owner}}, nil
}

// seatOperation is the common part of the seat commands: an operator (see
// checkOperator) and a seat of this room.
func seatOperation(s State, cmd Command) error {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return err
	}
	return seatInRoom(s, cmd.Seat)
}

// decideMuteSeat: the mute belongs to the seat, not to its holder. The
// holder stays seated (and in the room); when they release, leave, are
// kicked or time out, the seat stays muted for whoever takes it next, until
// UnmuteSeat. A free seat can be muted ahead.
func decideMuteSeat(s State, cmd Command) ([]Event, error) {
	if err := seatOperation(s, cmd); err != nil {
		return nil, err
	}
	if s.SeatMuted(cmd.Seat) {
		return nil, nil
	}
	return []Event{RoomSeatMuted{Seat: cmd.Seat, UserID: s.Seats[cmd.Seat], OperatorUserID: cmd.UserID}}, nil
}

func decideUnmuteSeat(s State, cmd Command) ([]Event, error) {
	if err := seatOperation(s, cmd); err != nil {
		return nil, err
	}
	if !s.SeatMuted(cmd.Seat) {
		return nil, nil
	}
	return []Event{RoomSeatUnmuted{Seat: cmd.Seat, OperatorUserID: cmd.UserID}}, nil
}

// decideLockSeat: locking an occupied seat takes its holder off it first
// (RoomMicReleased, reason seat_locked; they stay in the room), so "locked"
// always means "empty and closed".
func decideLockSeat(s State, cmd Command) ([]Event, error) {
	if err := seatOperation(s, cmd); err != nil {
		return nil, err
	}
	if s.SeatLocked(cmd.Seat) {
		return nil, nil
	}
	var evs []Event
	if holder := s.Seats[cmd.Seat]; holder != "" {
		evs = append(evs, RoomMicReleased{UserID: holder, Seat: cmd.Seat, Reason: ReasonSeatLocked})
	}
	return append(evs, RoomSeatLocked{Seat: cmd.Seat, OperatorUserID: cmd.UserID}), nil
}

func decideUnlockSeat(s State, cmd Command) ([]Event, error) {
	if err := seatOperation(s, cmd); err != nil {
		return nil, err
	}
	if !s.SeatLocked(cmd.Seat) {
		return nil, nil
	}
	return []Event{RoomSeatUnlocked{Seat: cmd.Seat, OperatorUserID: cmd.UserID}}, nil
}

// checkUpdate: an empty name keeps the name (a room always has one), an
// absent announcement keeps the announcement, an empty one clears it.
func checkUpdate(cmd Command) error {
	if cmd.Name == "" && cmd.Announcement == nil {
		return errclass.Invalidf("name or announcement is required")
	}
	if cmd.Name != "" {
		if err := checkName("name", cmd.Name); err != nil {
			return err
		}
	}
	if cmd.Announcement != nil {
		return checkFreeText("announcement", *cmd.Announcement, MaxAnnouncement, true)
	}
	return nil
}

func decideUpdate(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	name, ann := s.Name, s.Announcement
	if cmd.Name != "" {
		name = cmd.Name
	}
	if cmd.Announcement != nil {
		ann = *cmd.Announcement
	}
	if name == s.Name && ann == s.Announcement {
		return nil, nil
	}
	return []Event{RoomUpdated{OperatorUserID: cmd.UserID, Name: name, Announcement: ann}}, nil
}

// CheckID validates an identifier field: non-empty, at most MaxIDLen bytes,
// printable ASCII without spaces or ':' '/' (ids are joined with those into
// keys).
func CheckID(field, v string) error { return checkID(field, v) }

func checkID(field, v string) error {
	if v == "" {
		return errclass.Invalidf("%s is required", field)
	}
	if len(v) > MaxIDLen {
		return errclass.Invalidf("%s is longer than %d bytes", field, MaxIDLen)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || c == ':' || c == '/' {
			return errclass.Invalidf("%s has a character that is not allowed at byte %d (printable ASCII without space, ':' or '/')", field, i)
		}
	}
	return nil
}

// checkName: a name is required and must show something: not only
// spaces (any Unicode space).
func checkName(field, v string) error {
	if v == "" {
		return errclass.Invalidf("%s is required", field)
	}
	if err := checkText(field, v, MaxNameLen); err != nil {
		return err
	}
	if strings.TrimFunc(v, unicode.IsSpace) == "" {
		return errclass.Invalidf("%s is blank", field)
	}
	return checkVisible(field, v)
}

// checkVisible refuses what a reader cannot see but a renderer obeys:
// bidirectional controls (which reorder what follows: a name that reads
// as another) and zero-width characters (two names that look the same).
// A zero-width joiner between two symbols stays: it builds one emoji
// (a family, a flag) out of several.
func checkVisible(field, v string) error {
	runes := []rune(v)
	for i, r := range runes {
		if unicode.Is(unicode.Bidi_Control, r) {
			return errclass.Invalidf("%s has a bidirectional control character (U+%04X)", field, r)
		}
		switch r {
		case '\u200b', '\u200c', '\u2060', '\ufeff', '\u180e', '\u2061', '\u2062', '\u2063', '\u2064':
			return errclass.Invalidf("%s has a zero-width character (U+%04X)", field, r)
		case '\u200d':
			if i == 0 || i == len(runes)-1 || !emojiPart(runes[i-1]) || !emojiPart(runes[i+1]) {
				return errclass.Invalidf("%s has a zero-width joiner (U+200D) outside an emoji", field)
			}
		}
	}
	return nil
}

// emojiPart says whether r may stand beside a zero-width joiner inside
// an emoji sequence: a symbol, a modifier, or the emoji presentation
// selector.
func emojiPart(r rune) bool {
	return r == '\ufe0f' || unicode.In(r, unicode.So, unicode.Sk)
}

// checkText checks one-line free text (names, reasons).
func checkText(field, v string, max int) error { return checkFreeText(field, v, max, false) }

// checkFreeText: free text reaches IM clients and logs as it is, so it
// must be UTF-8 without control characters (NUL, escapes, C1 codes, which
// can corrupt a client's rendering or a log line); multiline text (the
// announcement) may break lines with "\n".
func checkFreeText(field, v string, max int, multiline bool) error {
	if len(v) > max {
		return errclass.Invalidf("%s is longer than %d bytes", field, max)
	}
	if !utf8.ValidString(v) {
		return errclass.Invalidf("%s is not valid UTF-8", field)
	}
	for i, r := range v {
		if unicode.IsControl(r) && !(multiline && r == '\n') {
			return errclass.Invalidf("%s has a control character (U+%04X) at byte %d", field, r, i)
		}
	}
	return nil
}
