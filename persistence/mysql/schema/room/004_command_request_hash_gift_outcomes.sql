-- Idempotency keys bound to their request (issue 14). request_hash is the
-- SHA-256 (hex) of the command's canonical encoding without command_id
-- and request_id: a command_id reused for a different command is refused
-- even after a restart, when only the log can tell. Rows written before
-- this column existed keep '' and are answered as before.
ALTER TABLE room_command_log ADD COLUMN request_hash VARCHAR(64) NOT NULL DEFAULT '' AFTER command_type;

-- The fence between a gift's room append and its refund (actors/wallet
-- doc). A gift's append inserts outcome 'sent' in its transaction; the
-- wallet reconciler (or the grain, after an append failed) inserts 'void'
-- before it refunds. The primary key lets exactly one of the two commit,
-- so a reservation is refunded only when its gift can never be appended.
CREATE TABLE IF NOT EXISTS room_gift_outcomes (
  app_code      VARCHAR(64)  NOT NULL,
  room_id       VARCHAR(128) NOT NULL,
  command_id    VARCHAR(128) NOT NULL,
  outcome       VARCHAR(8)   NOT NULL,
  created_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (app_code, room_id, command_id),
  CONSTRAINT ck_room_gift_outcomes_outcome CHECK (outcome IN ('sent', 'void'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
