// Package roomnotice is seed 003's room notice module: a RoomUserKicked
// fact of room_outbox becomes one C2C TIMCustomElem with Ext room_notice to
// the kicked user only (KickNotice: event_id, event_type, app_code,
// room_id, target_user_id, operator_user_id, reason, ban_until_ms,
// created_at_ms), with the same event_id as the room group's system
// message. The fact arrives by two entries with one idempotency boundary:
// the Scanner's read-only scan of room_outbox, and IngestEnvelope for the
// message-queue fanout consumer; both insert the same
// notice_delivery_events key, so a kick is sent once. The room group
// message and the IM member removal stay with the room relay. It never
// writes room_outbox (its status and lease belong to the relay), never
// runs room commands, and must not import a store backend or grpcapi.
package roomnotice
