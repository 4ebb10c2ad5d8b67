package room

import (
	"encoding/json"
	"fmt"
)

// Event types. The names are the outbox event_type values of the seeds.
const (
	TypeRoomCreated     = "RoomCreated"
	TypeRoomUserJoined  = "RoomUserJoined"
	TypeRoomUserLeft    = "RoomUserLeft"
	TypeRoomMicTaken    = "RoomMicTaken"
	TypeRoomMicReleased = "RoomMicReleased"
	TypeRoomGiftSent    = "RoomGiftSent"
	TypeRoomHeatChanged = "RoomHeatChanged"
	TypeRoomUserKicked  = "RoomUserKicked"
	TypeRoomClosed      = "RoomClosed"
	// TypeRoomRankChanged is emitted by the directory integration; it never
	// changes room state and never goes to IM.
	TypeRoomRankChanged = "RoomRankChanged"
)

// Event is one fact a command produced. Its JSON form is the envelope
// payload.
type Event interface {
	EventType() string
}

type RoomCreated struct {
	OwnerUserID  string   `json:"owner_user_id"`
	Name         string   `json:"name"`
	MicSeats     int      `json:"mic_seats"`
	AdminUserIDs []string `json:"admin_user_ids"`
	CreatedAtMs  int64    `json:"created_at_ms"`
}

type RoomUserJoined struct {
	UserID     string `json:"user_id"`
	JoinedAtMs int64  `json:"joined_at_ms"`
}

type RoomUserLeft struct {
	UserID string `json:"user_id"`
	Reason string `json:"reason"`
}

type RoomMicTaken struct {
	UserID string `json:"user_id"`
	Seat   int    `json:"seat"`
}

type RoomMicReleased struct {
	UserID string `json:"user_id"`
	Seat   int    `json:"seat"`
	Reason string `json:"reason"`
}

type RoomGiftSent struct {
	FromUserID string `json:"from_user_id"`
	ToUserID   string `json:"to_user_id"`
	GiftID     string `json:"gift_id"`
	GiftCount  int64  `json:"gift_count"`
	HeatValue  int64  `json:"heat_value"`
}

type RoomHeatChanged struct {
	Delta int64 `json:"delta"`
	Heat  int64 `json:"heat"`
}

type RoomUserKicked struct {
	TargetUserID   string `json:"target_user_id"`
	OperatorUserID string `json:"operator_user_id"`
	Reason         string `json:"reason"`
	BanUntilMs     int64  `json:"ban_until_ms"`
}

type RoomClosed struct {
	OperatorUserID string `json:"operator_user_id"`
	Reason         string `json:"reason"`
}

type RoomRankChanged struct {
	Rank     int64 `json:"rank"`
	PrevRank int64 `json:"prev_rank"`
	Heat     int64 `json:"heat"`
}

func (RoomCreated) EventType() string     { return TypeRoomCreated }
func (RoomUserJoined) EventType() string  { return TypeRoomUserJoined }
func (RoomUserLeft) EventType() string    { return TypeRoomUserLeft }
func (RoomMicTaken) EventType() string    { return TypeRoomMicTaken }
func (RoomMicReleased) EventType() string { return TypeRoomMicReleased }
func (RoomGiftSent) EventType() string    { return TypeRoomGiftSent }
func (RoomHeatChanged) EventType() string { return TypeRoomHeatChanged }
func (RoomUserKicked) EventType() string  { return TypeRoomUserKicked }
func (RoomClosed) EventType() string      { return TypeRoomClosed }
func (RoomRankChanged) EventType() string { return TypeRoomRankChanged }

// IsIMEvent reports whether events of this type are published to the
// room's IM group. The others are marked published without a send.
func IsIMEvent(eventType string) bool {
	switch eventType {
	case TypeRoomUserJoined, TypeRoomUserLeft, TypeRoomMicTaken, TypeRoomMicReleased,
		TypeRoomGiftSent, TypeRoomUserKicked, TypeRoomClosed:
		return true
	}
	return false
}

// DecodeEvent parses an envelope payload of the given type.
func DecodeEvent(eventType string, payload []byte) (Event, error) {
	var e Event
	switch eventType {
	case TypeRoomCreated:
		e = &RoomCreated{}
	case TypeRoomUserJoined:
		e = &RoomUserJoined{}
	case TypeRoomUserLeft:
		e = &RoomUserLeft{}
	case TypeRoomMicTaken:
		e = &RoomMicTaken{}
	case TypeRoomMicReleased:
		e = &RoomMicReleased{}
	case TypeRoomGiftSent:
		e = &RoomGiftSent{}
	case TypeRoomHeatChanged:
		e = &RoomHeatChanged{}
	case TypeRoomUserKicked:
		e = &RoomUserKicked{}
	case TypeRoomClosed:
		e = &RoomClosed{}
	case TypeRoomRankChanged:
		e = &RoomRankChanged{}
	default:
		return nil, fmt.Errorf("unknown event type %q", eventType)
	}
	if err := json.Unmarshal(payload, e); err != nil {
		return nil, fmt.Errorf("decode %s payload: %w", eventType, err)
	}
	return deref(e), nil
}

// deref turns the pointer DecodeEvent filled into the value type Decide
// produces, so live and replayed events compare equal.
func deref(e Event) Event {
	switch v := e.(type) {
	case *RoomCreated:
		return *v
	case *RoomUserJoined:
		return *v
	case *RoomUserLeft:
		return *v
	case *RoomMicTaken:
		return *v
	case *RoomMicReleased:
		return *v
	case *RoomGiftSent:
		return *v
	case *RoomHeatChanged:
		return *v
	case *RoomUserKicked:
		return *v
	case *RoomClosed:
		return *v
	case *RoomRankChanged:
		return *v
	}
	return e
}

// EventID is the deterministic id of the index-th event of the command
// that took seq in the room. Two activations deciding the same seq produce
// the same ids, so the outbox primary key fences them too.
func EventID(appCode, roomID string, seq int64, index int) string {
	return fmt.Sprintf("%s:%s:%d:%d", appCode, roomID, seq, index)
}
