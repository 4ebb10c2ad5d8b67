-- A command's events share its room_seq; their order within it is the
-- event's index in the command. The event id's text ends with that index,
-- so ordering by it put the 11th event of a command before the 2nd (a
-- batch ban of 20 reached IM out of order). The claims order a room's rows
-- by (room_seq, event_index) instead, straight from the per-room indexes.
ALTER TABLE room_outbox ADD COLUMN event_index INT NOT NULL DEFAULT 0;

-- Rows still to be sent get their index from their id (room.EventID:
-- app:room:seq:index); sent rows only matter to operators' lists.
UPDATE room_outbox SET event_index = CAST(SUBSTRING_INDEX(event_id, ':', -1) AS UNSIGNED)
  WHERE (status IN ('pending', 'parked') OR mq_status = 'pending') AND event_id REGEXP ':[0-9]{1,9}$';

ALTER TABLE room_outbox DROP KEY idx_room_outbox_room, ADD KEY idx_room_outbox_room (app_code, room_id, status, room_seq, event_index);

ALTER TABLE room_outbox DROP KEY idx_room_outbox_room_mq, ADD KEY idx_room_outbox_room_mq (app_code, room_id, mq_status, room_seq, event_index, mq_lock_until_ms);
