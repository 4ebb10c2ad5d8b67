package room

import v1 "github.com/hyapp/roomcell/api/roomcellv1"

// JoinRights is what the room lets a user do on Tencent's side of it
// (the audio room): enter (and hear), and send audio. The TRTC
// permission bits are delivery/trtc's; this is the rule they follow.
type JoinRights struct {
	SendAudio bool
	Seat      int // the user's seat, -1 when unseated
}

// JoinRightsOf decides a user's audio-room ticket from the room's state
// at nowMs: a member who is not banned enters and hears; seated on a seat
// that is neither muted nor locked, they also send audio. Anybody else is
// refused with the reason (the room missing or closed, the user banned or
// not a member), the same errors the room's commands give.
func JoinRightsOf(s State, userID string, nowMs int64) (JoinRights, error) {
	switch {
	case !s.Exists:
		return JoinRights{}, ErrRoomNotFound
	case s.Status == StatusClosed:
		return JoinRights{}, ErrRoomClosed
	case s.BannedAt(userID, nowMs):
		return JoinRights{}, ErrBanned
	case !s.IsMember(userID):
		return JoinRights{}, ErrNotMember
	}
	seat := s.SeatOf(userID)
	return JoinRights{Seat: seat, SendAudio: seat >= 0 && !s.SeatMuted(seat) && !s.SeatLocked(seat)}, nil
}

// Proto is the grain protocol's form of the rights.
func (r JoinRights) Proto() *v1.JoinRights {
	return &v1.JoinRights{SendAudio: r.SendAudio, Seat: int32(r.Seat)}
}

// AudioRevoked returns the user whose audio-room rights an event takes
// away while they may still hold a ticket issued before it: kicked,
// banned, their seat muted, or taken off their seat by someone else (a
// kick off the seat, the seat locked or removed). A move counts too: the
// seat it lands on may be muted or locked, which the event does not say,
// so a moved user re-enters with a ticket for the new seat. A seat freed
// because its holder left the audio room counts as well: their old ticket
// still says send audio, and they may come back with it. ok is false for every
// other event: a user's own leave or release needs no enforcing, a close
// dismisses the whole audio room, and rights that grow need a new ticket
// the client asks for.
func AudioRevoked(ev Event) (user string, ok bool) {
	switch e := ev.(type) {
	case RoomUserKicked:
		return e.TargetUserID, true
	case RoomUserBanned:
		return e.TargetUserID, true
	case RoomSeatMuted:
		return e.UserID, e.UserID != ""
	case RoomMicReleased:
		switch e.Reason {
		case ReasonKickedOffSeat, ReasonSeatLocked, ReasonSeatRemoved, ReasonMoved, ReasonAudioLeft, ReasonDisplaced, ReasonSwapped:
			return e.UserID, true
		}
	}
	return "", false
}
