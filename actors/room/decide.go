package room

import (
	"math"
	"slices"
	"unicode/utf8"
)

// Decide checks cmd against the room's rules and returns the events it
// produces. It does not change s. A nil error with no events is a valid
// no-op (joining a room one is in, taking the seat one holds).
// The rules, one per row, are the table in decide_test.go.
func Decide(s State, cmd Command) ([]Event, error) {
	if err := validate(cmd); err != nil {
		return nil, err
	}
	if cmd.Type == CmdCreateRoom {
		return decideCreate(s, cmd)
	}
	if !s.Exists {
		return nil, ErrRoomNotFound
	}
	if s.Status == StatusClosed {
		return nil, ErrRoomClosed
	}
	switch cmd.Type {
	case CmdJoinRoom:
		return decideJoin(s, cmd)
	case CmdLeaveRoom:
		return decideLeave(s, cmd)
	case CmdTakeMic:
		return decideTakeMic(s, cmd)
	case CmdReleaseMic:
		if !s.IsMember(cmd.UserID) {
			return nil, ErrNotMember
		}
		seat := s.SeatOf(cmd.UserID)
		if seat < 0 {
			return nil, ErrNotSeated
		}
		return []Event{RoomMicReleased{UserID: cmd.UserID, Seat: seat, Reason: ReasonReleased}}, nil
	case CmdSendGift:
		return decideGift(s, cmd)
	case CmdKickUser:
		return decideKick(s, cmd)
	case CmdCloseRoom:
		if err := checkOperator(s, cmd.UserID); err != nil {
			return nil, err
		}
		return []Event{RoomClosed{OperatorUserID: cmd.UserID, Reason: cmd.Reason}}, nil
	case CmdHeartbeat:
		// Presence (last seen) lives in the directory, not in room state:
		// a heartbeat only tells the caller whether it is still in the
		// room, so a client that was kicked or timed out learns it and
		// rejoins. It produces no events and is not logged.
		if !s.IsMember(cmd.UserID) {
			return nil, ErrNotMember
		}
		return nil, nil
	}
	// validate rejects unknown types; this is for a type added there but
	// not here.
	return nil, invalidf("unknown command type %q", cmd.Type)
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
		RoomCreated{OwnerUserID: cmd.UserID, Name: cmd.Name, MicSeats: seats, AdminUserIDs: admins, CreatedAtMs: cmd.NowMs},
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
	return []Event{RoomUserJoined{UserID: cmd.UserID, JoinedAtMs: cmd.NowMs}}, nil
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
	var evs []Event
	if seat := s.SeatOf(cmd.UserID); seat >= 0 {
		evs = append(evs, RoomMicReleased{UserID: cmd.UserID, Seat: seat, Reason: reason})
	}
	return append(evs, RoomUserLeft{UserID: cmd.UserID, Reason: reason}), nil
}

func decideTakeMic(s State, cmd Command) ([]Event, error) {
	if !s.IsMember(cmd.UserID) {
		return nil, ErrNotMember
	}
	if cmd.Seat >= len(s.Seats) {
		return nil, invalidf("seat %d out of range: room has %d seats", cmd.Seat, len(s.Seats))
	}
	switch holder := s.Seats[cmd.Seat]; holder {
	case cmd.UserID:
		return nil, nil
	case "":
	default:
		return nil, ErrSeatTaken
	}
	if s.SeatOf(cmd.UserID) >= 0 {
		return nil, ErrAlreadySeated
	}
	return []Event{RoomMicTaken{UserID: cmd.UserID, Seat: cmd.Seat}}, nil
}

func decideGift(s State, cmd Command) ([]Event, error) {
	if !s.IsMember(cmd.UserID) {
		return nil, ErrNotMember
	}
	if !s.IsMember(cmd.ToUserID) {
		return nil, ErrReceiverAbsent
	}
	evs := []Event{RoomGiftSent{FromUserID: cmd.UserID, ToUserID: cmd.ToUserID, GiftID: cmd.GiftID, GiftCount: cmd.GiftCount, HeatValue: cmd.HeatValue}}
	// Heat saturates instead of wrapping negative; Delta is what was
	// actually added, so heat always equals the sum of the deltas.
	delta := min(cmd.HeatValue, math.MaxInt64-s.Heat)
	if delta > 0 {
		evs = append(evs, RoomHeatChanged{Delta: delta, Heat: s.Heat + delta})
	}
	return evs, nil
}

// decideKick: the owner kicks anyone but themself; an admin in the room
// kicks ordinary members but neither the owner nor another admin (only the
// owner outranks an admin).
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
	var evs []Event
	if seat := s.SeatOf(cmd.TargetUserID); seat >= 0 {
		evs = append(evs, RoomMicReleased{UserID: cmd.TargetUserID, Seat: seat, Reason: ReasonKicked})
	}
	var until int64
	if cmd.BanSeconds > 0 {
		until = cmd.NowMs + cmd.BanSeconds*1000
	}
	return append(evs, RoomUserKicked{TargetUserID: cmd.TargetUserID, OperatorUserID: cmd.UserID, Reason: cmd.Reason, BanUntilMs: until}), nil
}

// validate checks the fields of cmd that do not depend on room state.
func validate(cmd Command) error {
	switch cmd.Type {
	case CmdCreateRoom, CmdJoinRoom, CmdLeaveRoom, CmdTakeMic, CmdReleaseMic,
		CmdSendGift, CmdKickUser, CmdCloseRoom, CmdHeartbeat:
	default:
		return invalidf("unknown command type %q", cmd.Type)
	}
	if err := checkID("app_code", cmd.AppCode); err != nil {
		return err
	}
	if err := checkID("room_id", cmd.RoomID); err != nil {
		return err
	}
	if err := checkID("user_id", cmd.UserID); err != nil {
		return err
	}
	if Mutates(cmd.Type) {
		if err := checkID("command_id", cmd.CommandID); err != nil {
			return err
		}
	}
	if err := checkText("reason", cmd.Reason, MaxReasonLen); err != nil {
		return err
	}
	switch cmd.Type {
	case CmdCreateRoom:
		if cmd.Name == "" {
			return invalidf("name is required")
		}
		if err := checkText("name", cmd.Name, MaxNameLen); err != nil {
			return err
		}
		if cmd.MicSeats < 0 || cmd.MicSeats > MaxMicSeats {
			return invalidf("mic_seats must be between 0 (default %d) and %d, got %d", DefaultMicSeats, MaxMicSeats, cmd.MicSeats)
		}
		if len(cmd.Admins) > MaxAdmins {
			return invalidf("at most %d admin_user_ids, got %d", MaxAdmins, len(cmd.Admins))
		}
		for _, a := range cmd.Admins {
			if err := checkID("admin_user_ids", a); err != nil {
				return err
			}
		}
	case CmdTakeMic:
		if cmd.Seat < 0 || cmd.Seat >= MaxMicSeats {
			return invalidf("seat must be between 0 and %d, got %d", MaxMicSeats-1, cmd.Seat)
		}
	case CmdSendGift:
		if err := checkID("to_user_id", cmd.ToUserID); err != nil {
			return err
		}
		if err := checkID("gift_id", cmd.GiftID); err != nil {
			return err
		}
		if cmd.GiftCount <= 0 || cmd.GiftCount > MaxGiftCount {
			return invalidf("gift_count must be between 1 and %d, got %d", MaxGiftCount, cmd.GiftCount)
		}
		if cmd.HeatValue < 0 {
			return invalidf("heat value must not be negative")
		}
	case CmdKickUser:
		if err := checkID("target_user_id", cmd.TargetUserID); err != nil {
			return err
		}
		if cmd.TargetUserID == cmd.UserID {
			return invalidf("target_user_id must differ from user_id")
		}
		if cmd.BanSeconds < 0 || cmd.BanSeconds > MaxBanSeconds {
			return invalidf("ban_seconds must be between 0 and %d, got %d", MaxBanSeconds, cmd.BanSeconds)
		}
	}
	return nil
}

// CheckID validates an identifier field: non-empty, at most MaxIDLen bytes,
// printable ASCII without spaces or ':' '/' (ids are joined with those into
// keys).
func CheckID(field, v string) error { return checkID(field, v) }

func checkID(field, v string) error {
	if v == "" {
		return invalidf("%s is required", field)
	}
	if len(v) > MaxIDLen {
		return invalidf("%s is longer than %d bytes", field, MaxIDLen)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || c == ':' || c == '/' {
			return invalidf("%s has a character that is not allowed at byte %d (printable ASCII without space, ':' or '/')", field, i)
		}
	}
	return nil
}

func checkText(field, v string, max int) error {
	if len(v) > max {
		return invalidf("%s is longer than %d bytes", field, max)
	}
	if !utf8.ValidString(v) {
		return invalidf("%s is not valid UTF-8", field)
	}
	return nil
}
