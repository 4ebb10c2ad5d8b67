// Package roomim maps room events onto Tencent: which events go to the
// room's IM group and at which priority (the room's event registry,
// room.EventInfoOf) and how (one send_group_msg with a TIMCustomElem
// carrying the envelope JSON, event_id in CloudCustomData, Random derived
// from it), the group id of a room (GroupID, also its TRTC room id), the
// group's life (EnsureGroup, which the room grain calls on CreateRoom's
// path before it replies, through PublishRoomEvent(RoomCreated); the same
// RoomCreated row, left pending when that failed, is the outbox's
// compensation), the effects that enforce a room's word at Tencent
// (effects.go: a kick bans the user from an AVChatRoom for what is left
// of the ban, or removes them from other group types, then removes them
// from the audio room through Audio; a close dismisses the audio room and
// destroys the group; a member's chat mute is Tencent's member mute,
// forbid_send_msg, for what is left of it, and an unmute lifts it), hot-room coalescing under the per-group rate, and
// C2C private notices (SendNotice), and the repair of an AVChatRoom's
// ban list that drifted from the room's beyond what the outbox keeps
// (reconcile.go: DiffBans, ReconcileBans). Effects run in the room's queue after
// the event's message, as part of its delivery, so they are ordered,
// retried, parked and repaired with it; with WithEffectSteps each step
// done (the message, then each effect) is recorded in the event's outbox
// row (EffectsDone), so a retry in any process does only the steps left.
// Non-IM events succeed without a call so their rows get marked
// published. Apart from those step records it never touches the outbox
// or room state: callers own marking and retries.
package roomim
