-- Every published row is written twice (the claim's lease, then the
-- published mark), and each write moves the row's entry in every
-- secondary index holding a column it changes: the mark moved four
-- (status is in each of them), the lease one. Fewer indexes on the hot
-- columns make both writes cheaper without changing what they record:
--  * idx_room_outbox_room_lease (app_code, room_id, status, lock_until_ms)
--    folds into idx_room_outbox_room: the claim's per-room depth and lease
--    check still read the index alone, and its locking read walks the
--    same index in (room_seq, event_index) order;
--  * idx_room_outbox_due (status, next_retry_at_ms, event_id) is read by no
--    query (the claim walks rooms by age and checks each room's lowest
--    row's due time; the operators' bulk requeue of waiting rows filters
--    the pending backlog by next_retry_at_ms).
ALTER TABLE room_outbox DROP KEY idx_room_outbox_room, ADD KEY idx_room_outbox_room (app_code, room_id, status, room_seq, event_index, lock_until_ms);

ALTER TABLE room_outbox DROP KEY idx_room_outbox_room_lease;

ALTER TABLE room_outbox DROP KEY idx_room_outbox_due;
