-- The effect steps of a row's event that its sender finished at Tencent
-- (the group message, a kick's ban, the audio room's removal, a close's
-- teardown), as bits delivery/roomim defines: a sender retrying the row in
-- another process skips them instead of doing them again (a group message
-- repeated after Tencent's 5-minute dedupe window reached the room twice).
-- Most rows have no effects and keep 0; no index reads it.
ALTER TABLE room_outbox ADD COLUMN effects_done INT UNSIGNED NOT NULL DEFAULT 0;
