-- What a command's events carry beside their payloads (room.SealedOf: a
-- room password's verifier), kept with the log row and never with the
-- events or the outbox, so nothing that reads events sees it; replay
-- attaches it again. NULL for the rows without (nearly all).
ALTER TABLE room_command_log ADD COLUMN sealed VARBINARY(1024) NULL;
