-- Code generated from persistence/mysql/schema/wallet by mysql.InitDBScript("wallet", "hyapp_wallet"). DO NOT EDIT.
-- Regenerate: ROOMCELL_UPDATE_INITDB=1 go test ./persistence/mysql -run InitDBScriptInSync
-- The MySQL image runs this once on an empty data directory. `roomcell migrate`
-- (or mysql.auto_migrate) applies the same files and finds them recorded in
-- schema_migrations, so it only ever adds newer ones.

CREATE DATABASE IF NOT EXISTS `hyapp_wallet` DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
USE `hyapp_wallet`;

CREATE TABLE IF NOT EXISTS schema_migrations (
  schema_name   VARCHAR(64)  NOT NULL,
  version       INT          NOT NULL,
  name          VARCHAR(255) NOT NULL,
  checksum      CHAR(64)     NOT NULL,
  applied_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (schema_name, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- ---- schema/wallet/001_wallet.sql ----
-- hyapp_wallet: balances, ledger, VIP state, idempotency records and the
-- wallet_outbox of seed 003. Amounts are BIGINT minor units; no float.
-- Identifiers compare byte for byte (utf8mb4_bin), as go-memdb does.

-- One balance per (app_code, user_id, asset_type). balance_version goes up
-- by one per change; the CHECK is the last line of defence against an
-- overdraft (the service refuses first).
CREATE TABLE IF NOT EXISTS wallet_accounts (
  app_code        VARCHAR(64)  NOT NULL,
  user_id         VARCHAR(64)  NOT NULL,
  asset_type      VARCHAR(16)  NOT NULL,
  available       BIGINT       NOT NULL DEFAULT 0,
  frozen          BIGINT       NOT NULL DEFAULT 0,
  balance_version BIGINT       NOT NULL DEFAULT 0,
  created_at_ms   BIGINT       NOT NULL,
  updated_at_ms   BIGINT       NOT NULL,
  PRIMARY KEY (app_code, user_id, asset_type),
  CONSTRAINT chk_wallet_accounts_non_negative CHECK (available >= 0 AND frozen >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per committed command: the unique key (app_code, command_id) is
-- the idempotency fence, result the reply replayed for a repeat and
-- fingerprint the request it answered.
CREATE TABLE IF NOT EXISTS wallet_transactions (
  transaction_id VARCHAR(64)  NOT NULL,
  app_code       VARCHAR(64)  NOT NULL,
  command_id     VARCHAR(64)  NOT NULL,
  kind           VARCHAR(16)  NOT NULL,
  fingerprint    VARCHAR(512) NOT NULL,
  result         JSON         NOT NULL,
  created_at_ms  BIGINT       NOT NULL,
  PRIMARY KEY (transaction_id),
  UNIQUE KEY uk_wallet_transactions_command (app_code, command_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One entry per changed account per transaction. The unique key refuses
-- two entries for one version and serves the per-account history scan.
CREATE TABLE IF NOT EXISTS wallet_ledger (
  id              BIGINT      NOT NULL AUTO_INCREMENT,
  transaction_id  VARCHAR(64) NOT NULL,
  command_id      VARCHAR(64) NOT NULL,
  app_code        VARCHAR(64) NOT NULL,
  user_id         VARCHAR(64) NOT NULL,
  asset_type      VARCHAR(16) NOT NULL,
  available_delta BIGINT      NOT NULL,
  frozen_delta    BIGINT      NOT NULL,
  available_after BIGINT      NOT NULL,
  frozen_after    BIGINT      NOT NULL,
  balance_version BIGINT      NOT NULL,
  created_at_ms   BIGINT      NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_wallet_ledger_version (app_code, user_id, asset_type, balance_version),
  KEY idx_wallet_ledger_transaction (transaction_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- VIP state per user; expires_at_ms <= now means no VIP.
CREATE TABLE IF NOT EXISTS wallet_vip (
  app_code      VARCHAR(64) NOT NULL,
  user_id       VARCHAR(64) NOT NULL,
  level         INT         NOT NULL DEFAULT 0,
  started_at_ms BIGINT      NOT NULL DEFAULT 0,
  expires_at_ms BIGINT      NOT NULL DEFAULT 0,
  created_at_ms BIGINT      NOT NULL,
  updated_at_ms BIGINT      NOT NULL,
  PRIMARY KEY (app_code, user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Facts for the notice service (seed 003), written in the wallet
-- transaction. event_id is the dedupe key; id is an ascending scan cursor
-- for readers (taken at insert, so it can become visible out of order);
-- (status, created_at_ms) serves a pending scan by time.
CREATE TABLE IF NOT EXISTS wallet_outbox (
  id            BIGINT       NOT NULL AUTO_INCREMENT,
  event_id      VARCHAR(191) NOT NULL,
  app_code      VARCHAR(64)  NOT NULL,
  user_id       VARCHAR(64)  NOT NULL,
  event_type    VARCHAR(64)  NOT NULL,
  payload       JSON         NOT NULL,
  status        VARCHAR(16)  NOT NULL DEFAULT 'pending',
  created_at_ms BIGINT       NOT NULL,
  updated_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (event_id),
  UNIQUE KEY uk_wallet_outbox_id (id),
  KEY idx_wallet_outbox_status_created (status, created_at_ms),
  KEY idx_wallet_outbox_user (app_code, user_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('wallet', 1, '001_wallet', '648954dfd955c08fea8a0da6e23b072ead185864bafca5afe12461c509ecf3d0', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/wallet/002_gift_holds.sql ----
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
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('wallet', 2, '002_gift_holds', 'a7625243a784283649dcef826dc63f00f544681eb8adc8d9355eeadc6fda1d8d', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));

-- ---- schema/wallet/003_gift_holds_parked.sql ----
-- Parked gift reservations. A reservation whose settlement keeps failing
-- is parked by the gift reconciler: no reconciler on any node tries it
-- again (a restart does not forget it) and an operator resolves it with
-- roomctl wallet hold confirm|refund from any node. parked_at_ms is 0 for
-- a reservation that is not parked; park_reason is the last failure, for
-- the operator. A settled row keeps both as history.
ALTER TABLE wallet_gift_holds
  ADD COLUMN parked_at_ms BIGINT       NOT NULL DEFAULT 0,
  ADD COLUMN park_reason  VARCHAR(512) NOT NULL DEFAULT '';

-- The reconciler's scan reads open rows that are not parked by age
-- (state = 'open' AND parked_at_ms = 0 ORDER BY created_at_ms): one range,
-- never the parked rows, however many there are. The operator's list of
-- parked rows (state = 'open' AND parked_at_ms > 0 ORDER BY parked_at_ms)
-- and the open-row metrics use the same index.
ALTER TABLE wallet_gift_holds
  DROP KEY idx_wallet_gift_holds_state_created,
  ADD KEY idx_wallet_gift_holds_state_parked_created (state, parked_at_ms, created_at_ms);
INSERT IGNORE INTO schema_migrations (schema_name, version, name, checksum, applied_at_ms)
  VALUES ('wallet', 3, '003_gift_holds_parked', '619043fe55b8ad6811dfe9d39ad28b44f661b6a624944705c5684732e2971881', FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000));
