-- The notice workers' read-only scan of one event type by age
-- (actors/notice/roomnotice reads RoomUserKicked rows after its cursor
-- (created_at_ms, event_id), whatever their status). Without it the scan
-- would read every room event to find the rare kicks; with it a scan reads
-- only the rows it returns. It costs one more index entry per outbox row,
-- written once: no column of it changes after the insert.
ALTER TABLE room_outbox ADD KEY idx_room_outbox_type_created (event_type, created_at_ms, event_id);
