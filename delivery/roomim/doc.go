// Package roomim maps room events onto Tencent IM: which events go to the
// room's IM group and at which priority (the room's event registry,
// room.EventInfoOf) and how (one send_group_msg with a
// TIMCustomElem carrying the envelope JSON, event_id in CloudCustomData,
// Random derived from it), the group id of a room (GroupID), the group's
// life (EnsureGroup in the command path, RoomCreated as its outbox
// compensation), the member removal of RoomUserKicked, hot-room coalescing
// under the per-group rate, and C2C private notices (SendNotice). Non-IM
// events succeed without a call so their rows get marked published. It
// never touches the outbox or room state: callers own marking and retries.
package roomim
