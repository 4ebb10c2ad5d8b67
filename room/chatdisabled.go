package room

// Chat disabled for all: a room-wide switch. While it is on only the
// room's owner and admins may send chat messages in its IM group: the IM
// BeforeSendMsg callback (tencentcb) refuses everyone else's, reading
// the room view's chat_disabled. Per-member chat mutes are apart from it:
// turning it off lifts none of them.
const CmdSetChatDisabled = "SetChatDisabled"

// ChatDisabled reports whether the switch is on.
func (s State) ChatDisabled() bool { return s.x().ChatDisabled }

// MaySendChat reports whether user may send chat messages in the room's
// IM group now: not while muted, and while the switch is on only the
// owner and the admins.
func (s State) MaySendChat(user string, nowMs int64) bool {
	if s.MutedAt(user, nowMs) {
		return false
	}
	return !s.ChatDisabled() || s.IsAdmin(user)
}

// decideSetChatDisabled: the owner or an admin in the room; the same
// state is a no-op.
func decideSetChatDisabled(s State, cmd Command) ([]Event, error) {
	if err := checkOperator(s, cmd.UserID); err != nil {
		return nil, err
	}
	if cmd.ChatDisabled == s.ChatDisabled() {
		return nil, nil
	}
	return []Event{RoomChatDisabledChanged{Disabled: cmd.ChatDisabled, OperatorUserID: cmd.UserID}}, nil
}

// RoomChatDisabledChanged: only the owner and admins may send chat
// messages (Disabled), or everyone may again.
type RoomChatDisabledChanged struct {
	Disabled       bool   `json:"disabled"`
	OperatorUserID string `json:"operator_user_id"`
}

func (RoomChatDisabledChanged) EventType() string { return TypeRoomChatDisabledChanged }
func (e RoomChatDisabledChanged) apply(s *State) {
	if !e.Disabled && s.Extra == nil {
		return
	}
	s.mx().ChatDisabled = e.Disabled
}
