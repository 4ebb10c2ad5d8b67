-- The outbox claim asks, for a handful of rooms at once, how many rows
-- each has pending and whether any of them is under a live lease. With
-- this index both answers come from the index alone (no row lookups), so
-- a claim costs the same few statements whatever the rooms' depth; only
-- the leased entries (lock_until_ms > now, few) are looked up to see who
-- holds them.
ALTER TABLE room_outbox ADD KEY idx_room_outbox_room_lease (app_code, room_id, status, lock_until_ms);
