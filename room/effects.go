package room

import (
	"fmt"
	"math/bits"
	"strings"
)

// Effect is one kind of thing an event causes outside the room. An event
// type's row in the registry (event.go) lists its effects, and every
// consumer reads that row instead of a switch of its own: delivery/roomim
// (the IM message and what follows it at Tencent), the room notice worker,
// the MQ fanout, retention. A new kind is one constant here, its name in
// effectNames, and the consumer that does it.
type Effect uint32

const (
	// IMCreate: the room's IM group is made (again, on a reopen).
	IMCreate Effect = 1 << iota
	// IMRemove: the target leaves the IM group: an AVChatRoom bans them
	// for what is left of UntilMs, other group types remove the member.
	IMRemove
	// IMBan: the target is banned from an AVChatRoom for what is left of
	// UntilMs (anyone may enter one from the client); other group types
	// keep member lists the room's kicks and joins keep.
	IMBan
	// IMUnban: the target's AVChatRoom ban is lifted.
	IMUnban
	// IMMute: the target's IM member mute is set until UntilMs, or lifted
	// (UntilMs 0).
	IMMute
	// IMDestroy: the IM group is destroyed.
	IMDestroy
	// TRTCRemove: the target is removed from the audio room.
	TRTCRemove
	// TRTCRevoke: with ticket enforcement (trtc.enforce_tickets), the
	// user whose audio rights the event takes away (AudioRevoked) is
	// removed from the audio room, to come back with a ticket of their
	// new rights.
	TRTCRevoke
	// TRTCDismiss: the audio room is dismissed.
	TRTCDismiss
	// Notice: a private notice to the target (actors/notice/roomnotice);
	// retention keeps the outbox row until the notice worker passed it.
	Notice
	// MQ: published to the rooms' MQ topic (actors/relay's fanout).
	MQ
	// IMMessage: a message to the room's IM group (EventInfo.IM).
	IMMessage
)

var effectNames = map[Effect]string{
	IMCreate: "im_create", IMRemove: "im_remove", IMBan: "im_ban", IMUnban: "im_unban", IMMute: "im_mute",
	IMDestroy: "im_destroy", TRTCRemove: "trtc_remove", TRTCRevoke: "trtc_revoke", TRTCDismiss: "trtc_dismiss", Notice: "notice", MQ: "mq", IMMessage: "im_message",
}

// Targeted are the effects that act on one user: the event says whom
// (TargetOf). TRTCRevoke names its user by AudioRevoked.
const Targeted = IMRemove | IMBan | IMUnban | IMMute | TRTCRemove | Notice

// IMSide and AudioSide are the effects done at Tencent after an event's
// message, on the IM group and on the audio room. A row has at most one
// of each: delivery/roomim records one step per side.
const (
	IMSide    = IMRemove | IMBan | IMUnban | IMMute | IMDestroy
	AudioSide = TRTCRemove | TRTCRevoke | TRTCDismiss
)

// AtTencent are the effects delivery/roomim does: an event with none of
// them is marked published without reaching it.
const AtTencent = IMCreate | IMMessage | IMSide | AudioSide

// Has reports whether e includes every effect of f.
func (e Effect) Has(f Effect) bool { return f != 0 && e&f == f }

// String lists the effects by name, "|"-separated.
func (e Effect) String() string {
	var names []string
	for rest := e; rest != 0; rest &= rest - 1 {
		bit := Effect(1) << bits.TrailingZeros32(uint32(rest))
		name, ok := effectNames[bit]
		if !ok {
			name = fmt.Sprintf("effect(%d)", uint32(bit))
		}
		names = append(names, name)
	}
	return strings.Join(names, "|")
}

// Causes reports whether events of eventType cause f (all of it); false
// for a type this version does not know.
func Causes(eventType string, f Effect) bool {
	info, ok := EventInfoOf(eventType)
	return ok && info.Causes().Has(f)
}

// CausesAny reports whether events of eventType cause any effect of f.
func CausesAny(eventType string, f Effect) bool {
	info, ok := EventInfoOf(eventType)
	return ok && info.Causes()&f != 0
}

// TypesCausing lists the event types that cause f, sorted.
func TypesCausing(f Effect) []string {
	var out []string
	for _, t := range EventTypes() {
		if Causes(t, f) {
			out = append(out, t)
		}
	}
	return out
}

// Target is whom an event's targeted effects act on, until when (0:
// lifted, or no end) and why (shown at Tencent).
type Target struct {
	UserID  string
	UntilMs int64
	Reason  string
}

// targeted is an event whose row has targeted effects.
type targeted interface {
	Event
	target() Target
}

// TargetOf returns whom ev's targeted effects act on; ok is false for an
// event without a target.
func TargetOf(ev Event) (Target, bool) {
	if t, ok := ev.(targeted); ok {
		return t.target(), true
	}
	return Target{}, false
}

func (e RoomUserKicked) target() Target {
	return Target{UserID: e.TargetUserID, UntilMs: e.BanUntilMs, Reason: e.Reason}
}
func (e RoomMemberMuted) target() Target {
	return Target{UserID: e.TargetUserID, UntilMs: e.MutedUntilMs}
}
func (e RoomMemberUnmuted) target() Target { return Target{UserID: e.TargetUserID} }
func (e RoomAudioRemoved) target() Target  { return Target{UserID: e.UserID} }
func (e RoomUserBanned) target() Target {
	return Target{UserID: e.TargetUserID, UntilMs: e.BanUntilMs, Reason: e.Reason}
}
func (e RoomUserUnbanned) target() Target { return Target{UserID: e.TargetUserID} }
