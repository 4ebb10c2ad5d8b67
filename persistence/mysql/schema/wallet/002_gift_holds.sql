-- Gift reservations (issue 14, actors/wallet/doc.go): one row per gift
-- command, written in the wallet transaction that moves its money. A gift
-- is reserved (sender available -> frozen) before the room appends it,
-- then confirmed (frozen spent, receiver credited) or refunded (frozen
-- back to available) once the room's outcome is known. The state index
-- serves the reconciler's scan of old open rows and the open-row metrics
-- without reading settled history.
CREATE TABLE IF NOT EXISTS wallet_gift_holds (
  app_code              VARCHAR(64)  NOT NULL,
  command_id            VARCHAR(64)  NOT NULL,
  transaction_id        VARCHAR(64)  NOT NULL,
  room_id               VARCHAR(128) NOT NULL,
  from_user_id          VARCHAR(64)  NOT NULL,
  to_user_id            VARCHAR(64)  NOT NULL,
  gift_id               VARCHAR(64)  NOT NULL,
  gift_count            BIGINT       NOT NULL,
  price_total           BIGINT       NOT NULL,
  diamond_total         BIGINT       NOT NULL,
  heat_value            BIGINT       NOT NULL,
  state                 VARCHAR(16)  NOT NULL,
  settle_transaction_id VARCHAR(64)  NOT NULL DEFAULT '',
  created_at_ms         BIGINT       NOT NULL,
  updated_at_ms         BIGINT       NOT NULL,
  PRIMARY KEY (app_code, command_id),
  KEY idx_wallet_gift_holds_state_created (state, created_at_ms),
  CONSTRAINT ck_wallet_gift_holds_state CHECK (state IN ('open', 'confirmed', 'refunded'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
